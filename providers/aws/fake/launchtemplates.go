package fake

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// LaunchTemplate is a launch template as the fake keeps it: the parts of
// its data a node's launch depends on.
type LaunchTemplate struct {
	ID, Name                  string
	ImageID, InstanceProfile  string
	UserData                  string // decoded
	SecurityGroups            []string
	HTTPTokens, HTTPEndpoint  string
	HTTPPutResponseHopLimit   string
	BlockDevices              []BlockDevice
	Tags                      map[string]string
	CreateTime                time.Time
	AssociatePublicIPAddress  string
	DetailedMonitoringEnabled string
}

// BlockDevice is one block device mapping of a launch template.
type BlockDevice struct {
	DeviceName, VolumeType, VolumeSize, Encrypted, DeleteOnTermination string
}

type launchTemplateItem struct {
	ID         string  `xml:"launchTemplateId"`
	Name       string  `xml:"launchTemplateName"`
	CreateTime string  `xml:"createTime"`
	Default    int     `xml:"defaultVersionNumber"`
	Latest     int     `xml:"latestVersionNumber"`
	Tags       *tagSet `xml:"tagSet"`
}

func (lt LaunchTemplate) item() launchTemplateItem {
	return launchTemplateItem{ID: lt.ID, Name: lt.Name, CreateTime: lt.CreateTime.UTC().Format(time.RFC3339), Default: 1, Latest: 1, Tags: tagsOf(lt.Tags)}
}

type createLaunchTemplateResponse struct {
	XMLName        xml.Name           `xml:"CreateLaunchTemplateResponse"`
	NS             string             `xml:"xmlns,attr"`
	RequestID      string             `xml:"requestId"`
	LaunchTemplate launchTemplateItem `xml:"launchTemplate"`
}

// createLaunchTemplate stores a template; names are unique.
func (s *Server) createLaunchTemplate(q query) (any, *Fault) {
	name := q.get("LaunchTemplateName")
	if name == "" {
		return nil, &Fault{Status: http.StatusBadRequest, Code: "MissingParameter", Message: "LaunchTemplateName is required"}
	}
	if slices.ContainsFunc(s.templates, func(lt LaunchTemplate) bool { return lt.Name == name }) {
		return nil, &Fault{Status: http.StatusBadRequest, Code: "InvalidLaunchTemplateName.AlreadyExistsException",
			Message: fmt.Sprintf("Launch template name already in use: %s", name)}
	}
	d := "LaunchTemplateData."
	userData, err := base64.StdEncoding.DecodeString(q.get(d + "UserData"))
	if err != nil {
		return nil, &Fault{Status: http.StatusBadRequest, Code: "InvalidUserData.Malformed", Message: "user data is not base64"}
	}
	s.nextID++
	lt := LaunchTemplate{ID: fmt.Sprintf("lt-0fake%012d", s.nextID), Name: name, ImageID: q.get(d + "ImageId"),
		InstanceProfile: q.get(d + "IamInstanceProfile.Name"), UserData: string(userData), SecurityGroups: q.list(d + "SecurityGroupId"),
		HTTPTokens: q.get(d + "MetadataOptions.HttpTokens"), HTTPEndpoint: q.get(d + "MetadataOptions.HttpEndpoint"),
		HTTPPutResponseHopLimit:   q.get(d + "MetadataOptions.HttpPutResponseHopLimit"),
		AssociatePublicIPAddress:  q.get(d + "NetworkInterface.1.AssociatePublicIpAddress"),
		DetailedMonitoringEnabled: q.get(d + "Monitoring.Enabled"),
		Tags:                      q.tags("launch-template"), CreateTime: s.clock.Now()}
	if lt.ImageID == "" {
		return nil, &Fault{Status: http.StatusBadRequest, Code: "InvalidParameterValue", Message: "LaunchTemplateData.ImageId is required by the fake"}
	}
	for i := 1; ; i++ {
		p := fmt.Sprintf("%sBlockDeviceMapping.%d.", d, i)
		name := q.get(p + "DeviceName")
		if name == "" {
			break
		}
		lt.BlockDevices = append(lt.BlockDevices, BlockDevice{DeviceName: name, VolumeType: q.get(p + "Ebs.VolumeType"), VolumeSize: q.get(p + "Ebs.VolumeSize"),
			Encrypted: q.get(p + "Ebs.Encrypted"), DeleteOnTermination: q.get(p + "Ebs.DeleteOnTermination")})
	}
	s.templates = append(s.templates, lt)
	return createLaunchTemplateResponse{NS: ec2Namespace, RequestID: "fake", LaunchTemplate: lt.item()}, nil
}

type describeLaunchTemplatesResponse struct {
	XMLName   xml.Name             `xml:"DescribeLaunchTemplatesResponse"`
	NS        string               `xml:"xmlns,attr"`
	RequestID string               `xml:"requestId"`
	Templates []launchTemplateItem `xml:"launchTemplates>item"`
	NextToken string               `xml:"nextToken,omitempty"`
}

// describeLaunchTemplates answers by name, id and tag filters. Naming a
// template that does not exist is an error, as in EC2.
func (s *Server) describeLaunchTemplates(q query) (any, *Fault) {
	names, ids, filters := q.list("LaunchTemplateName"), q.list("LaunchTemplateId"), q.filters()
	out := describeLaunchTemplatesResponse{NS: ec2Namespace, RequestID: "fake"}
	for _, lt := range s.templates {
		field := fieldsOf(lt.Tags, map[string]string{"launch-template-name": lt.Name})
		if (len(names) == 0 || slices.Contains(names, lt.Name)) && (len(ids) == 0 || slices.Contains(ids, lt.ID)) && matches(field, filters) {
			out.Templates = append(out.Templates, lt.item())
		}
	}
	if len(names) > 0 && len(out.Templates) == 0 {
		return nil, &Fault{Status: http.StatusBadRequest, Code: "InvalidLaunchTemplateName.NotFoundException",
			Message: "At least one of the launch templates specified in the request does not exist."}
	}
	return out, nil
}

type deleteLaunchTemplateResponse struct {
	XMLName        xml.Name           `xml:"DeleteLaunchTemplateResponse"`
	NS             string             `xml:"xmlns,attr"`
	RequestID      string             `xml:"requestId"`
	LaunchTemplate launchTemplateItem `xml:"launchTemplate"`
}

func (s *Server) deleteLaunchTemplate(q query) (any, *Fault) {
	name, id := q.get("LaunchTemplateName"), q.get("LaunchTemplateId")
	i := slices.IndexFunc(s.templates, func(lt LaunchTemplate) bool { return (name != "" && lt.Name == name) || (id != "" && lt.ID == id) })
	if i < 0 {
		return nil, &Fault{Status: http.StatusBadRequest, Code: "InvalidLaunchTemplateName.NotFoundException",
			Message: fmt.Sprintf("The specified launch template, with template name %s, does not exist.", name)}
	}
	lt := s.templates[i]
	s.templates = slices.Delete(s.templates, i, i+1)
	return deleteLaunchTemplateResponse{NS: ec2Namespace, RequestID: "fake", LaunchTemplate: lt.item()}, nil
}

// LaunchTemplates are the templates that exist now.
func (s *Server) LaunchTemplates() []LaunchTemplate {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.templates)
}
