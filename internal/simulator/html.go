package simulator

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

//go:embed report.html.tmpl
var reportTemplate string

var reportHTML = template.Must(template.New("report").Funcs(template.FuncMap{
	"dur":     func(d Duration) string { return time.Duration(d).String() },
	"seconds": func(s float64) string { return seconds(s).String() },
	"money":   func(v float64) string { return fmt.Sprintf("$%.2f", v) },
	"rate":    func(v float64) string { return fmt.Sprintf("$%.4f/h", v) },
	"describe": func(e Entry) string {
		d := e.describe()
		return strings.TrimSpace(d[min(len(d), 15):])
	},
}).Parse(reportTemplate))

// Chart geometry, in SVG user units.
const (
	chartWidth, chartHeight = 880.0, 240.0
	marginLeft, marginRight = 64.0, 36.0
	marginTop, marginBottom = 12.0, 28.0
)

// palette colours series in a fixed order.
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"}

type chart struct {
	Title, Unit    string
	Width, Height  float64
	PlotX, PlotY   float64
	PlotW, PlotH   float64
	Series         []series
	XTicks, YTicks []tick
}

type series struct {
	Name, Color, Points string
}

type tick struct {
	Pos   float64
	Label string
}

// WriteHTML writes the report as one self-contained HTML page: the summary,
// SVG charts of nodes, $/h, pending pods and utilisation over time, and
// the timeline. It loads nothing from the network.
func (r *Report) WriteHTML(w io.Writer) error {
	total := r.End.Sub(r.Start)
	byKey := func(pick func(Sample) map[string]float64) map[string][]float64 {
		out := map[string][]float64{}
		for i, s := range r.Samples {
			for k, v := range pick(s) {
				if out[k] == nil {
					out[k] = make([]float64, len(r.Samples))
				}
				out[k][i] = v
			}
		}
		return out
	}
	nodes := byKey(func(s Sample) map[string]float64 {
		m := map[string]float64{}
		for k, v := range s.Nodes {
			m[k] = float64(v)
		}
		return m
	})
	cost := byKey(func(s Sample) map[string]float64 { return s.CostPerHour })
	pending := map[string][]float64{"pending pods": nil}
	util := map[string][]float64{"cpu": nil, "memory": nil}
	for _, s := range r.Samples {
		pending["pending pods"] = append(pending["pending pods"], float64(s.Pending))
		util["cpu"] = append(util["cpu"], s.CPU)
		util["memory"] = append(util["memory"], s.Memory)
	}
	data := struct {
		Report *Report
		Charts []chart
	}{Report: r, Charts: []chart{
		r.chart("Nodes by NodePool and capacity type", "nodes", total, nodes, true),
		r.chart("Cost by NodePool and capacity type", "$/h", total, cost, true),
		r.chart("Pending pods", "pods", total, pending, false),
		r.chart("Utilisation: requests of bound pods over allocatable of Ready nodes", "%", total, util, false),
	}}
	return reportHTML.Execute(w, data)
}

// chart draws each series as a step line over the samples; stacked series
// are drawn cumulatively so the top line is the total.
func (r *Report) chart(title, unit string, total time.Duration, values map[string][]float64, stacked bool) chart {
	c := chart{Title: title, Unit: unit, Width: chartWidth, Height: chartHeight, PlotX: marginLeft, PlotY: marginTop,
		PlotW: chartWidth - marginLeft - marginRight, PlotH: chartHeight - marginTop - marginBottom}
	names := slices.Sorted(maps.Keys(values))
	n := len(r.Samples)
	cum := make([][]float64, len(names))
	top := 0.0
	for i, name := range names {
		cum[i] = make([]float64, n)
		for j := range n {
			v := 0.0
			if j < len(values[name]) {
				v = values[name][j]
			}
			if stacked && i > 0 {
				v += cum[i-1][j]
			}
			cum[i][j] = v
			top = math.Max(top, v)
		}
	}
	yMax := niceCeil(top)
	x := func(d Duration) float64 {
		if total <= 0 {
			return c.PlotX
		}
		return c.PlotX + c.PlotW*float64(d)/float64(total)
	}
	y := func(v float64) float64 { return c.PlotY + c.PlotH - c.PlotH*v/yMax }
	for i, name := range names {
		var pts []string
		for j, s := range r.Samples {
			if j > 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.At), y(cum[i][j-1])))
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.At), y(cum[i][j])))
		}
		if n > 0 {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(Duration(total)), y(cum[i][n-1])))
		}
		c.Series = append(c.Series, series{Name: name, Color: palette[i%len(palette)], Points: strings.Join(pts, " ")})
	}
	for i := 0; i <= 4; i++ {
		v := yMax * float64(i) / 4
		c.YTicks = append(c.YTicks, tick{Pos: y(v), Label: trimFloat(v)})
	}
	step := niceStep(total)
	for t := time.Duration(0); t <= total; t += step {
		c.XTicks = append(c.XTicks, tick{Pos: x(Duration(t)), Label: t.String()})
	}
	return c
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten (at least 1).
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// niceStep spaces about six time ticks.
func niceStep(total time.Duration) time.Duration {
	for _, s := range []time.Duration{time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour} {
		if total/s <= 8 {
			return s
		}
	}
	return 48 * time.Hour
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}
