package simulator

import (
	"bytes"
	"context"
	"errors"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chromium finds Debian's headless browser; without it the browser test
// is skipped, unless NODEWRIGHT_REQUIRE_CHROMIUM is set (CI sets it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("NODEWRIGHT_REQUIRE_CHROMIUM") != "" {
		t.Fatal("chromium is not installed (NODEWRIGHT_REQUIRE_CHROMIUM is set)")
	}
	t.Skip("chromium is not installed")
	return ""
}

// runChromium runs headless Chromium on page with extra flags and returns
// what it printed on stdout.
func runChromium(t *testing.T, bin, page string, flags ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir()}, flags...)
	// The browser itself sometimes crashes on a loaded machine (a
	// segmentation fault at start); that says nothing of the page, so a
	// crash is retried twice. Any other failure fails the test.
	var stdout, stderr bytes.Buffer
	for attempt := 1; ; attempt++ {
		cmd := exec.CommandContext(ctx, bin, append(args, "file://"+page)...)
		stdout.Reset()
		stderr.Reset()
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err == nil {
			return stdout.Bytes()
		}
		var exit *exec.ExitError
		if attempt < 3 && errors.As(err, &exit) && !exit.Exited() && ctx.Err() == nil {
			continue // killed by a signal: crashed
		}
		t.Fatalf("chromium %v: %v\n%s", flags, err, stderr.String())
	}
}

// The HTML report renders in a real browser: the page is not blank, every
// chart is an SVG with its series drawn, and the series' colours are on the
// screen.
func TestHTMLReportRendersInChromium(t *testing.T) {
	bin := chromium(t)
	rep := runScenario(t, "  steps:\n    - at: 5m\n      scale: {kind: Deployment, name: web, replicas: 30}\n    - at: 20m\n      scale: {kind: Deployment, name: web, replicas: 5}\n", 40*time.Minute)
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var buf bytes.Buffer
	if err := rep.WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "http://") && !strings.Contains(buf.String(), `xmlns="http://www.w3.org/2000/svg"`) {
		t.Error("the report refers to the network")
	}
	if err := os.WriteFile(page, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}

	dom := string(runChromium(t, bin, page, "--dump-dom"))
	if n := strings.Count(dom, "<svg"); n != 4 {
		t.Errorf("%d SVG charts in the rendered DOM, want 4", n)
	}
	if n := strings.Count(dom, `<polyline class="series"`); n < 4 {
		t.Errorf("%d series drawn, want at least one per chart", n)
	}

	shot := filepath.Join(dir, "shot.png")
	runChromium(t, bin, page, "--window-size=1000,1600", "--screenshot="+shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	nonWhite, blue, orange := 0, 0, 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			if c.R < 240 || c.G < 240 || c.B < 240 {
				nonWhite++
			}
			if near(c, 0x1f, 0x77, 0xb4) {
				blue++
			}
			if near(c, 0xff, 0x7f, 0x0e) {
				orange++
			}
		}
	}
	total := b.Dx() * b.Dy()
	if nonWhite < total/50 {
		t.Errorf("screenshot nearly blank: %d of %d pixels drawn", nonWhite, total)
	}
	// Each chart's first series is blue; utilisation's memory line orange.
	if blue < 500 || orange < 100 {
		t.Errorf("series colours on screen: %d blue and %d orange pixels, want the lines drawn", blue, orange)
	}
}

func near(c color.NRGBA, r, g, b uint8) bool {
	d := func(x, y uint8) int {
		if x > y {
			return int(x - y)
		}
		return int(y - x)
	}
	return d(c.R, r) < 24 && d(c.G, g) < 24 && d(c.B, b) < 24
}
