package fake

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// queue is an SQS queue: messages in order, each invisible until a time
// once received.
type queue struct {
	name     string
	messages []*message
}

type message struct {
	id, body, receipt string
	sent, hiddenUntil time.Time
	received          int
}

func (s *Server) queueURL(name string) string {
	return fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", s.region, accountID, name)
}

// queueOf finds a queue by URL (or name).
func (s *Server) queueOf(url string) (*queue, *Fault) {
	name := url[strings.LastIndex(url, "/")+1:]
	if q, ok := s.queues[name]; ok {
		return q, nil
	}
	return nil, &Fault{Status: http.StatusBadRequest, Code: "com.amazonaws.sqs#QueueDoesNotExist", Message: fmt.Sprintf("The specified queue %s does not exist.", name)}
}

func (s *Server) getQueueURL(body []byte) (any, *Fault) {
	var in struct{ QueueName string }
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, &Fault{Status: http.StatusBadRequest, Code: "com.amazonaws.sqs#InvalidParameterValue", Message: err.Error()}
	}
	if _, fault := s.queueOf(in.QueueName); fault != nil {
		return nil, fault
	}
	return map[string]string{"QueueUrl": s.queueURL(in.QueueName)}, nil
}

func (s *Server) sendMessage(body []byte) (any, *Fault) {
	var in struct{ QueueUrl, MessageBody string }
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, &Fault{Status: http.StatusBadRequest, Code: "com.amazonaws.sqs#InvalidParameterValue", Message: err.Error()}
	}
	q, fault := s.queueOf(in.QueueUrl)
	if fault != nil {
		return nil, fault
	}
	s.nextID++
	m := &message{id: fmt.Sprintf("fake-message-%d", s.nextID), body: in.MessageBody, sent: s.clock.Now()}
	q.messages = append(q.messages, m)
	return map[string]string{"MessageId": m.id, "MD5OfMessageBody": md5Hex(m.body)}, nil
}

type sqsMessage struct {
	MessageID     string            `json:"MessageId"`
	ReceiptHandle string            `json:"ReceiptHandle"`
	MD5OfBody     string            `json:"MD5OfBody"`
	Body          string            `json:"Body"`
	Attributes    map[string]string `json:"Attributes,omitempty"`
}

// receiveMessage hands out up to MaxNumberOfMessages visible messages and
// hides them for VisibilityTimeout (default 30 s). Long polling is
// ServeHTTP's: it asks again until WaitTimeSeconds pass.
func (s *Server) receiveMessage(body []byte) (any, *Fault) {
	var in struct {
		QueueUrl            string
		MaxNumberOfMessages int
		VisibilityTimeout   *int
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, &Fault{Status: http.StatusBadRequest, Code: "com.amazonaws.sqs#InvalidParameterValue", Message: err.Error()}
	}
	q, fault := s.queueOf(in.QueueUrl)
	if fault != nil {
		return nil, fault
	}
	n := max(1, min(in.MaxNumberOfMessages, 10))
	hide := 30 * time.Second
	if in.VisibilityTimeout != nil {
		hide = time.Duration(*in.VisibilityTimeout) * time.Second
	}
	now := s.clock.Now()
	out := []sqsMessage{}
	for _, m := range q.messages {
		if len(out) == n {
			break
		}
		if now.Before(m.hiddenUntil) {
			continue
		}
		s.nextID++
		m.receipt, m.hiddenUntil = fmt.Sprintf("receipt-%s-%d", m.id, s.nextID), now.Add(hide)
		m.received++
		out = append(out, sqsMessage{MessageID: m.id, ReceiptHandle: m.receipt, MD5OfBody: md5Hex(m.body), Body: m.body,
			Attributes: map[string]string{"SentTimestamp": strconv.FormatInt(m.sent.UnixMilli(), 10), "ApproximateReceiveCount": strconv.Itoa(m.received)}})
	}
	return map[string]any{"Messages": out}, nil
}

func (s *Server) deleteMessage(body []byte) (any, *Fault) {
	var in struct{ QueueUrl, ReceiptHandle string }
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, &Fault{Status: http.StatusBadRequest, Code: "com.amazonaws.sqs#InvalidParameterValue", Message: err.Error()}
	}
	q, fault := s.queueOf(in.QueueUrl)
	if fault != nil {
		return nil, fault
	}
	i := slices.IndexFunc(q.messages, func(m *message) bool { return m.receipt == in.ReceiptHandle })
	if i < 0 {
		return nil, &Fault{Status: http.StatusBadRequest, Code: "com.amazonaws.sqs#ReceiptHandleIsInvalid", Message: fmt.Sprintf("receipt handle %q is not valid", in.ReceiptHandle)}
	}
	q.messages = slices.Delete(q.messages, i, i+1)
	return map[string]any{}, nil
}

// longPoll is how long a ReceiveMessage body asks to wait for messages.
func longPoll(body []byte) time.Duration {
	var in struct{ WaitTimeSeconds int }
	if json.Unmarshal(body, &in) != nil {
		return 0
	}
	return time.Duration(min(max(in.WaitTimeSeconds, 0), 20)) * time.Second
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Queue makes an SQS queue (idempotent).
func (s *Server) Queue(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.queues[name]; !ok {
		s.queues[name] = &queue{name: name}
	}
}

// QueueDepth is how many messages a queue holds (in flight included).
func (s *Server) QueueDepth(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q, ok := s.queues[name]; ok {
		return len(q.messages)
	}
	return 0
}

// event is an EventBridge event as it reaches SQS.
type event struct {
	Version    string   `json:"version"`
	ID         string   `json:"id"`
	DetailType string   `json:"detail-type"`
	Source     string   `json:"source"`
	Account    string   `json:"account"`
	Time       string   `json:"time"`
	Region     string   `json:"region"`
	Resources  []string `json:"resources"`
	Detail     any      `json:"detail"`
}

// Send puts an EventBridge event about an instance on a queue, as the
// rules Karpenter's CloudFormation sets up would: kind is one of
// "spot-interruption", "rebalance", "scheduled-change", or an instance
// state for a state-change notification ("stopping", "terminated", ...).
func (s *Server) Send(queueName, kind, instanceID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.queues[queueName]
	if !ok {
		return fmt.Errorf("fake aws: no queue %s", queueName)
	}
	in, ok := s.instances[instanceID]
	if !ok {
		return fmt.Errorf("fake aws: no instance %s", instanceID)
	}
	now := s.clock.Now()
	s.nextID++
	e := event{Version: "0", ID: fmt.Sprintf("fake-event-%d", s.nextID), Source: "aws.ec2", Account: accountID, Time: now.UTC().Format(time.RFC3339),
		Region: s.region, Resources: []string{fmt.Sprintf("arn:aws:ec2:%s:instance/%s", in.Zone, in.ID)}}
	switch kind {
	case "spot-interruption":
		e.DetailType, e.Detail = "EC2 Spot Instance Interruption Warning", map[string]string{"instance-id": in.ID, "instance-action": "terminate"}
	case "rebalance":
		e.DetailType, e.Detail = "EC2 Instance Rebalance Recommendation", map[string]string{"instance-id": in.ID}
	case "scheduled-change":
		e.Source, e.DetailType = "aws.health", "AWS Health Event"
		e.Detail = map[string]any{"service": "EC2", "eventTypeCategory": "scheduledChange", "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
			"startTime": now.Add(72 * time.Hour).UTC().Format(time.RFC1123), "affectedEntities": []map[string]string{{"entityValue": in.ID}}}
	default:
		e.DetailType, e.Detail = "EC2 Instance State-change Notification", map[string]string{"instance-id": in.ID, "state": kind}
	}
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	q.messages = append(q.messages, &message{id: e.ID, body: string(raw), sent: now})
	return nil
}
