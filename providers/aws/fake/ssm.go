package fake

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// jsonActions are the JSON 1.1 calls the fake answers, by X-Amz-Target.
var jsonActions = map[string]func(*Server, []byte) (any, *Fault){
	"AmazonSSM.GetParameter":          (*Server).getParameter,
	"AmazonSQS.GetQueueUrl":           (*Server).getQueueURL,
	"AmazonSQS.SendMessage":           (*Server).sendMessage,
	"AmazonSQS.ReceiveMessage":        (*Server).receiveMessage,
	"AmazonSQS.DeleteMessage":         (*Server).deleteMessage,
	"AWSPriceListService.GetProducts": (*Server).getProducts,
}

type ssmParameter struct {
	Name     string `json:"Name"`
	Type     string `json:"Type"`
	Value    string `json:"Value"`
	Version  int64  `json:"Version"`
	DataType string `json:"DataType"`
	ARN      string `json:"ARN"`
}

// getParameter answers SSM GetParameter from the world's parameters
// (those the AMI aliases resolve through).
func (s *Server) getParameter(body []byte) (any, *Fault) {
	var in struct {
		Name string `json:"Name"`
	}
	if err := json.Unmarshal(body, &in); err != nil || in.Name == "" {
		return nil, &Fault{Status: http.StatusBadRequest, Code: "ValidationException", Message: "GetParameter needs a Name"}
	}
	v, ok := s.world.Parameters[in.Name]
	if !ok {
		return nil, &Fault{Status: http.StatusBadRequest, Code: "ParameterNotFound", Message: fmt.Sprintf("parameter %s not found", in.Name)}
	}
	dataType := "text"
	if hasPrefixFold(v, "ami-") {
		dataType = "aws:ec2:image"
	}
	return map[string]any{"Parameter": ssmParameter{Name: in.Name, Type: "String", Value: v, Version: 1, DataType: dataType,
		ARN: fmt.Sprintf("arn:aws:ssm:%s::parameter%s", s.region, in.Name)}}, nil
}
