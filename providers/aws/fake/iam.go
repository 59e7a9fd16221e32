package fake

import (
	"encoding/xml"
	"fmt"
	"maps"
	"net/http"
	"slices"
)

// accountID is the fake's AWS account.
const accountID = "111122223333"

// iamNamespace is the XML namespace of IAM's answers.
const iamNamespace = "https://iam.amazonaws.com/doc/2010-05-08/"

// iamActions are the IAM calls the fake answers (Query protocol, version
// 2010-05-08). Each runs under the server's lock.
var iamActions = map[string]func(*Server, query) (any, *Fault){
	"GetInstanceProfile":            (*Server).getInstanceProfile,
	"CreateInstanceProfile":         (*Server).createInstanceProfile,
	"AddRoleToInstanceProfile":      (*Server).addRoleToInstanceProfile,
	"RemoveRoleFromInstanceProfile": (*Server).removeRoleFromInstanceProfile,
	"DeleteInstanceProfile":         (*Server).deleteInstanceProfile,
}

type iamRole struct {
	Name       string `xml:"RoleName"`
	ID         string `xml:"RoleId"`
	ARN        string `xml:"Arn"`
	Path       string `xml:"Path"`
	CreateDate string `xml:"CreateDate"`
}

type iamTag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type iamInstanceProfile struct {
	Name       string    `xml:"InstanceProfileName"`
	ID         string    `xml:"InstanceProfileId"`
	ARN        string    `xml:"Arn"`
	Path       string    `xml:"Path"`
	CreateDate string    `xml:"CreateDate"`
	Roles      []iamRole `xml:"Roles>member"`
	Tags       []iamTag  `xml:"Tags>member,omitempty"`
}

func (p InstanceProfile) described() iamInstanceProfile {
	out := iamInstanceProfile{Name: p.Name, ID: p.ID, ARN: fmt.Sprintf("arn:aws:iam::%s:instance-profile/%s", accountID, p.Name), Path: "/",
		CreateDate: "2026-11-01T00:00:00Z"}
	if p.Role != "" {
		out.Roles = []iamRole{{Name: p.Role, ID: "AROAFAKE" + p.Role, ARN: fmt.Sprintf("arn:aws:iam::%s:role/%s", accountID, p.Role), Path: "/",
			CreateDate: "2026-11-01T00:00:00Z"}}
	}
	for _, k := range slices.Sorted(maps.Keys(p.Tags)) {
		out.Tags = append(out.Tags, iamTag{Key: k, Value: p.Tags[k]})
	}
	return out
}

func (s *Server) profile(name string) (int, *Fault) {
	i := slices.IndexFunc(s.world.InstanceProfiles, func(p InstanceProfile) bool { return p.Name == name })
	if i < 0 {
		return -1, &Fault{Status: http.StatusNotFound, Code: "NoSuchEntity", Message: fmt.Sprintf("Instance Profile %s cannot be found.", name)}
	}
	return i, nil
}

func (s *Server) getInstanceProfile(q query) (any, *Fault) {
	i, fault := s.profile(q.get("InstanceProfileName"))
	if fault != nil {
		return nil, fault
	}
	return iamWrap("GetInstanceProfile", s.world.InstanceProfiles[i]), nil
}

func (s *Server) createInstanceProfile(q query) (any, *Fault) {
	name := q.get("InstanceProfileName")
	if name == "" {
		return nil, &Fault{Status: http.StatusBadRequest, Code: "ValidationError", Message: "InstanceProfileName is required"}
	}
	if _, fault := s.profile(name); fault == nil {
		return nil, &Fault{Status: http.StatusConflict, Code: "EntityAlreadyExists", Message: fmt.Sprintf("Instance Profile %s already exists.", name)}
	}
	s.nextID++
	p := InstanceProfile{Name: name, ID: fmt.Sprintf("AIPAFAKE%013d", s.nextID), Tags: map[string]string{}}
	for i := 1; ; i++ {
		k := q.get(fmt.Sprintf("Tags.member.%d.Key", i))
		if k == "" {
			break
		}
		p.Tags[k] = q.get(fmt.Sprintf("Tags.member.%d.Value", i))
	}
	s.world.InstanceProfiles = append(s.world.InstanceProfiles, p)
	return iamWrap("CreateInstanceProfile", p), nil
}

// addRoleToInstanceProfile puts a role in a profile: the role must exist
// (World.Roles, or the role of any profile) and a profile holds one role.
func (s *Server) addRoleToInstanceProfile(q query) (any, *Fault) {
	i, fault := s.profile(q.get("InstanceProfileName"))
	if fault != nil {
		return nil, fault
	}
	role := q.get("RoleName")
	known := slices.Contains(s.world.Roles, role) || slices.ContainsFunc(s.world.InstanceProfiles, func(p InstanceProfile) bool { return p.Role == role })
	if !known {
		return nil, &Fault{Status: http.StatusNotFound, Code: "NoSuchEntity", Message: fmt.Sprintf("The role with name %s cannot be found.", role)}
	}
	if p := &s.world.InstanceProfiles[i]; p.Role != "" {
		return nil, &Fault{Status: http.StatusConflict, Code: "LimitExceeded", Message: fmt.Sprintf("Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1 (%s holds %s)", p.Name, p.Role)}
	}
	s.world.InstanceProfiles[i].Role = role
	return iamEmpty("AddRoleToInstanceProfile"), nil
}

func (s *Server) removeRoleFromInstanceProfile(q query) (any, *Fault) {
	i, fault := s.profile(q.get("InstanceProfileName"))
	if fault != nil {
		return nil, fault
	}
	if s.world.InstanceProfiles[i].Role != q.get("RoleName") {
		return nil, &Fault{Status: http.StatusNotFound, Code: "NoSuchEntity", Message: fmt.Sprintf("the profile does not hold role %s", q.get("RoleName"))}
	}
	s.world.InstanceProfiles[i].Role = ""
	return iamEmpty("RemoveRoleFromInstanceProfile"), nil
}

func (s *Server) deleteInstanceProfile(q query) (any, *Fault) {
	i, fault := s.profile(q.get("InstanceProfileName"))
	if fault != nil {
		return nil, fault
	}
	if s.world.InstanceProfiles[i].Role != "" {
		return nil, &Fault{Status: http.StatusConflict, Code: "DeleteConflict", Message: "Cannot delete entity, must remove roles from instance profile first."}
	}
	s.world.InstanceProfiles = slices.Delete(s.world.InstanceProfiles, i, i+1)
	return iamEmpty("DeleteInstanceProfile"), nil
}

// InstanceProfiles are the instance profiles that exist now.
func (s *Server) InstanceProfiles() []InstanceProfile {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.world.InstanceProfiles)
}

type iamResult struct {
	Profile *iamInstanceProfile `xml:"InstanceProfile,omitempty"`
}

// iamWrap answers an action with an instance profile: <ActionResponse>
// <ActionResult><InstanceProfile>.
func iamWrap(action string, p InstanceProfile) any {
	d := p.described()
	return iamDocumentFor(action, &iamResult{Profile: &d})
}

func iamEmpty(action string) any { return iamDocumentFor(action, nil) }

func iamDocumentFor(action string, result *iamResult) any {
	type named struct {
		XMLName xml.Name
		*iamResult
	}
	out := struct {
		XMLName   xml.Name
		NS        string `xml:"xmlns,attr"`
		Result    *named
		RequestID string `xml:"ResponseMetadata>RequestId"`
	}{XMLName: xml.Name{Local: action + "Response"}, NS: iamNamespace, RequestID: "fake"}
	if result != nil {
		out.Result = &named{XMLName: xml.Name{Local: action + "Result"}, iamResult: result}
	}
	return out
}
