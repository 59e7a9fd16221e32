package fake

import (
	"cmp"
	"encoding/xml"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Instance is an EC2 instance the fake launched.
type Instance struct {
	ID, InstanceType, Zone, SubnetID, ImageID string
	// CapacityType is "spot" or "on-demand".
	CapacityType string
	// State is pending, running, shutting-down or terminated.
	State                     string
	LaunchTemplate            string
	SecurityGroups            []string
	InstanceProfile, UserData string
	PrivateDNSName            string
	Tags                      map[string]string
	LaunchTime                time.Time
	// visibleFrom is when DescribeInstances starts to see the instance.
	visibleFrom time.Time
}

// pool is one way to buy capacity: a type, a zone and a capacity type.
type pool struct{ instanceType, zone, capacityType string }

// InsufficientCapacity makes CreateFleet find no capacity for a type in a
// zone and capacity type (on), or lifts it (!on). "*" for the type or the
// zone stands for all.
func (s *Server) InsufficientCapacity(instanceType, zone, capacityType string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.ice[pool{instanceType, zone, capacityType}] = true
	} else {
		delete(s.ice, pool{instanceType, zone, capacityType})
	}
}

// Instances are every instance the fake launched, terminated ones too.
func (s *Server) Instances() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Instance, 0, len(s.instances))
	for _, in := range s.instances {
		out = append(out, *in)
	}
	slices.SortFunc(out, func(a, b Instance) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// AddInstance runs an instance as if launched outside Nodewright's
// provider (a leaked one, or a test's): it gets an ID, a launch time and
// a private DNS name, and its ID is returned.
func (s *Server) AddInstance(in Instance) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	in.ID = fmt.Sprintf("i-0fake%012d", s.nextID)
	in.LaunchTime = s.clock.Now()
	in.PrivateDNSName = fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", s.nextID/250%250, s.nextID%250)
	if in.State == "" {
		in.State = "running"
	}
	if in.Tags == nil {
		in.Tags = map[string]string{}
	}
	s.instances[in.ID] = &in
	return in.ID
}

// SetInstanceState moves an instance to state (e.g. "stopping"), as AWS
// would on its own.
func (s *Server) SetInstanceState(id, state string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[id]
	if !ok {
		return fmt.Errorf("fake aws: no instance %s", id)
	}
	in.State = state
	return nil
}

// short reports whether a pool has no capacity now.
func (s *Server) short(p pool) bool {
	return s.ice[p] || s.ice[pool{"*", p.zone, p.capacityType}] || s.ice[pool{p.instanceType, "*", p.capacityType}] || s.ice[pool{"*", "*", p.capacityType}]
}

// price is the catalog's price of a pool, and whether it is sold.
func (s *Server) price(p pool) (float64, bool) {
	for i := range s.catalog {
		it := &s.catalog[i]
		if it.Name != p.instanceType {
			continue
		}
		for _, o := range it.Offerings {
			if o.Zone == p.zone && o.CapacityType == p.capacityType && o.Available {
				return o.Price, true
			}
		}
	}
	return 0, false
}

type fleetOverrides struct {
	InstanceType string `xml:"instanceType"`
	SubnetID     string `xml:"subnetId,omitempty"`
	Zone         string `xml:"availabilityZone,omitempty"`
	ImageID      string `xml:"imageId,omitempty"`
}

type fleetLaunchTemplateAndOverrides struct {
	Name      string         `xml:"launchTemplateSpecification>launchTemplateName"`
	Overrides fleetOverrides `xml:"overrides"`
}

type fleetError struct {
	LaunchTemplateAndOverrides fleetLaunchTemplateAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string                          `xml:"lifecycle"`
	ErrorCode                  string                          `xml:"errorCode"`
	ErrorMessage               string                          `xml:"errorMessage"`
}

type fleetInstance struct {
	LaunchTemplateAndOverrides fleetLaunchTemplateAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string                          `xml:"lifecycle"`
	InstanceIDs                []string                        `xml:"instanceIds>item"`
	InstanceType               string                          `xml:"instanceType"`
}

type createFleetResponse struct {
	XMLName   xml.Name        `xml:"CreateFleetResponse"`
	NS        string          `xml:"xmlns,attr"`
	RequestID string          `xml:"requestId"`
	FleetID   string          `xml:"fleetId"`
	Errors    []fleetError    `xml:"errorSet>item"`
	Instances []fleetInstance `xml:"fleetInstanceSet>item"`
}

// override is one launch option a fleet request names.
type override struct {
	template *LaunchTemplate
	ltName   string
	pool     pool
	subnet   string
	image    string
	priority float64
}

// launchFleet answers an instant fleet: every instance goes to the
// cheapest pool among the overrides that has capacity ("prioritized"
// on-demand goes to the lowest priority instead); when none has, every
// override comes back in the error set with InsufficientInstanceCapacity.
func (s *Server) launchFleet(q query) (*createFleetResponse, *Fault) {
	if t := q.get("Type"); t != "instant" {
		return nil, &Fault{Status: http.StatusBadRequest, Code: "InvalidParameterValue", Message: fmt.Sprintf("the fake serves instant fleets only, not %q", t)}
	}
	capacityType := q.get("TargetCapacitySpecification.DefaultTargetCapacityType")
	if capacityType != "spot" && capacityType != "on-demand" {
		return nil, &Fault{Status: http.StatusBadRequest, Code: "InvalidParameterValue", Message: fmt.Sprintf("DefaultTargetCapacityType %q", capacityType)}
	}
	total, err := strconv.Atoi(q.get("TargetCapacitySpecification.TotalTargetCapacity"))
	if err != nil || total < 1 {
		return nil, &Fault{Status: http.StatusBadRequest, Code: "InvalidParameterValue", Message: "TotalTargetCapacity must be a positive number"}
	}
	s.nextID++
	out := createFleetResponse{NS: ec2Namespace, RequestID: "fake", FleetID: fmt.Sprintf("fleet-0fake%012d", s.nextID)}
	var options []override
	for i := 1; ; i++ {
		p := fmt.Sprintf("LaunchTemplateConfigs.%d.", i)
		name := q.get(p + "LaunchTemplateSpecification.LaunchTemplateName")
		id := q.get(p + "LaunchTemplateSpecification.LaunchTemplateId")
		if name == "" && id == "" {
			break
		}
		ti := slices.IndexFunc(s.templates, func(lt LaunchTemplate) bool { return lt.Name == name || lt.ID == id })
		for j := 1; ; j++ {
			op := fmt.Sprintf("%sOverrides.%d.", p, j)
			instanceType := q.get(op + "InstanceType")
			if instanceType == "" {
				break
			}
			o := override{ltName: name, subnet: q.get(op + "SubnetId"), image: q.get(op + "ImageId"), priority: math.Inf(1)}
			o.pool = pool{instanceType: instanceType, zone: q.get(op + "AvailabilityZone"), capacityType: capacityType}
			if sn := slices.IndexFunc(s.world.Subnets, func(sn Subnet) bool { return sn.ID == o.subnet }); sn >= 0 {
				o.pool.zone = s.world.Subnets[sn].Zone
			}
			if v, err := strconv.ParseFloat(q.get(op+"Priority"), 64); err == nil {
				o.priority = v
			}
			if ti < 0 {
				out.Errors = append(out.Errors, o.failure("InvalidLaunchTemplateName.NotFoundException", fmt.Sprintf("launch template %s%s does not exist", name, id)))
				continue
			}
			o.template = &s.templates[ti]
			options = append(options, o)
		}
	}
	best := -1
	var bestPrice float64
	prioritized := capacityType == "on-demand" && q.get("OnDemandOptions.AllocationStrategy") == "prioritized"
	for i, o := range options {
		price, sold := s.price(o.pool)
		if !sold || s.short(o.pool) {
			continue
		}
		better := best < 0 || price < bestPrice
		if prioritized && best >= 0 {
			better = o.priority < options[best].priority || (o.priority == options[best].priority && price < bestPrice)
		}
		if better {
			best, bestPrice = i, price
		}
	}
	if best < 0 {
		for _, o := range options {
			out.Errors = append(out.Errors, o.failure("InsufficientInstanceCapacity",
				fmt.Sprintf("There is no %s capacity for %s in %s.", o.pool.capacityType, o.pool.instanceType, o.pool.zone)))
		}
		return &out, nil
	}
	o := options[best]
	launched := fleetInstance{LaunchTemplateAndOverrides: o.described(), Lifecycle: capacityType, InstanceType: o.pool.instanceType}
	image := o.image
	if image == "" {
		image = o.template.ImageID
	}
	for range total {
		s.nextID++
		in := &Instance{ID: fmt.Sprintf("i-0fake%012d", s.nextID), InstanceType: o.pool.instanceType, Zone: o.pool.zone, SubnetID: o.subnet,
			ImageID: image, CapacityType: capacityType, State: "running", LaunchTemplate: o.template.Name, SecurityGroups: slices.Clone(o.template.SecurityGroups),
			InstanceProfile: o.template.InstanceProfile, UserData: o.template.UserData, Tags: q.tags("instance"), LaunchTime: s.clock.Now(),
			PrivateDNSName: fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", s.nextID/250%250, s.nextID%250), visibleFrom: s.clock.Now().Add(s.describeLag)}
		s.instances[in.ID] = in
		launched.InstanceIDs = append(launched.InstanceIDs, in.ID)
	}
	out.Instances = append(out.Instances, launched)
	return &out, nil
}

func (o override) described() fleetLaunchTemplateAndOverrides {
	return fleetLaunchTemplateAndOverrides{Name: o.ltName, Overrides: fleetOverrides{InstanceType: o.pool.instanceType, SubnetID: o.subnet, Zone: o.pool.zone, ImageID: o.image}}
}

func (o override) failure(code, message string) fleetError {
	return fleetError{LaunchTemplateAndOverrides: o.described(), Lifecycle: o.pool.capacityType, ErrorCode: code, ErrorMessage: message}
}

type instanceItem struct {
	ID              string  `xml:"instanceId"`
	ImageID         string  `xml:"imageId"`
	StateCode       int     `xml:"instanceState>code"`
	StateName       string  `xml:"instanceState>name"`
	InstanceType    string  `xml:"instanceType"`
	LaunchTime      string  `xml:"launchTime"`
	Zone            string  `xml:"placement>availabilityZone"`
	SubnetID        string  `xml:"subnetId,omitempty"`
	VPCID           string  `xml:"vpcId"`
	PrivateDNSName  string  `xml:"privateDnsName"`
	Lifecycle       string  `xml:"instanceLifecycle,omitempty"`
	Groups          []group `xml:"groupSet>item"`
	Tags            *tagSet `xml:"tagSet"`
	Architecture    string  `xml:"architecture,omitempty"`
	InstanceProfile string  `xml:"iamInstanceProfile>arn,omitempty"`
}

type group struct {
	ID string `xml:"groupId"`
}

var stateCodes = map[string]int{"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}

func (s *Server) described(in *Instance) instanceItem {
	item := instanceItem{ID: in.ID, ImageID: in.ImageID, StateCode: stateCodes[in.State], StateName: in.State, InstanceType: in.InstanceType,
		LaunchTime: in.LaunchTime.UTC().Format(time.RFC3339), Zone: in.Zone, SubnetID: in.SubnetID, VPCID: s.world.VPCID,
		PrivateDNSName: in.PrivateDNSName, Tags: tagsOf(in.Tags)}
	if in.CapacityType == "spot" {
		item.Lifecycle = "spot"
	}
	for _, g := range in.SecurityGroups {
		item.Groups = append(item.Groups, group{ID: g})
	}
	if in.InstanceProfile != "" {
		item.InstanceProfile = fmt.Sprintf("arn:aws:iam::%s:instance-profile/%s", accountID, in.InstanceProfile)
	}
	return item
}

type reservation struct {
	ID        string         `xml:"reservationId"`
	Instances []instanceItem `xml:"instancesSet>item"`
}

type describeInstancesResponse struct {
	XMLName      xml.Name      `xml:"DescribeInstancesResponse"`
	NS           string        `xml:"xmlns,attr"`
	RequestID    string        `xml:"requestId"`
	Reservations []reservation `xml:"reservationSet>item"`
	NextToken    string        `xml:"nextToken,omitempty"`
}

// describeInstances answers by id and filters (tag:, tag-key,
// instance-state-name, instance-type, availability-zone), one reservation
// per instance, 1,000 at a time. Naming an instance that does not exist
// (or that the describe lag still hides) is an error, as in EC2.
func (s *Server) describeInstances(q query) (any, *Fault) {
	ids, filters := q.list("InstanceId"), q.filters()
	var picked []*Instance
	now := s.clock.Now()
	for _, id := range ids {
		if in, ok := s.instances[id]; !ok || now.Before(in.visibleFrom) {
			return nil, noSuchInstance(id)
		}
	}
	for _, in := range s.instances {
		if now.Before(in.visibleFrom) {
			continue // launched, not known to DescribeInstances yet
		}
		field := fieldsOf(in.Tags, map[string]string{"instance-id": in.ID, "instance-state-name": in.State, "instance-type": in.InstanceType,
			"availability-zone": in.Zone, "subnet-id": in.SubnetID, "image-id": in.ImageID})
		if (len(ids) == 0 || slices.Contains(ids, in.ID)) && matches(field, filters) {
			picked = append(picked, in)
		}
	}
	slices.SortFunc(picked, func(a, b *Instance) int { return cmp.Compare(a.ID, b.ID) })
	from, to, next, fault := page(q, len(picked), 1000)
	if fault != nil {
		return nil, fault
	}
	out := describeInstancesResponse{NS: ec2Namespace, RequestID: "fake", NextToken: next}
	for _, in := range picked[from:to] {
		out.Reservations = append(out.Reservations, reservation{ID: "r-" + in.ID[2:], Instances: []instanceItem{s.described(in)}})
	}
	return out, nil
}

type stateChange struct {
	ID           string `xml:"instanceId"`
	CurrentCode  int    `xml:"currentState>code"`
	Current      string `xml:"currentState>name"`
	PreviousCode int    `xml:"previousState>code"`
	Previous     string `xml:"previousState>name"`
}

type terminateInstancesResponse struct {
	XMLName   xml.Name      `xml:"TerminateInstancesResponse"`
	NS        string        `xml:"xmlns,attr"`
	RequestID string        `xml:"requestId"`
	Changes   []stateChange `xml:"instancesSet>item"`
}

// terminateInstances ends instances at once (they stay described as
// terminated, as in EC2).
func (s *Server) terminateInstances(q query) (any, *Fault) {
	out := terminateInstancesResponse{NS: ec2Namespace, RequestID: "fake"}
	for _, id := range q.list("InstanceId") {
		in, ok := s.instances[id]
		if !ok {
			return nil, noSuchInstance(id)
		}
		previous := in.State
		in.State = "terminated"
		out.Changes = append(out.Changes, stateChange{ID: id, CurrentCode: stateCodes[in.State], Current: in.State, PreviousCode: stateCodes[previous], Previous: previous})
	}
	return out, nil
}

type createTagsResponse struct {
	XMLName   xml.Name `xml:"CreateTagsResponse"`
	NS        string   `xml:"xmlns,attr"`
	RequestID string   `xml:"requestId"`
	Return    bool     `xml:"return"`
}

// createTags tags instances.
func (s *Server) createTags(q query) (any, *Fault) {
	for _, id := range q.list("ResourceId") {
		in, ok := s.instances[id]
		if !ok {
			return nil, noSuchInstance(id)
		}
		for i := 1; ; i++ {
			k := q.get(fmt.Sprintf("Tag.%d.Key", i))
			if k == "" {
				break
			}
			in.Tags[k] = q.get(fmt.Sprintf("Tag.%d.Value", i))
		}
	}
	return createTagsResponse{NS: ec2Namespace, RequestID: "fake", Return: true}, nil
}

// noSuchInstance is EC2's answer naming an instance it does not have.
func noSuchInstance(id string) *Fault {
	return &Fault{Status: http.StatusBadRequest, Code: "InvalidInstanceID.NotFound", Message: fmt.Sprintf("The instance ID '%s' does not exist", id)}
}
