package images

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

const (
	passwd = "root:x:0:0:root:/root:/bin/sh\n" +
		"www-data:x:33:33:www-data:/var/www:/bin/false\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
	group = "root:x:0:\n" +
		"www-data:x:33:\n" +
		"nogroup:x:65534:\n"
	indexHTML = "<!doctype html>\n<title>cairn busybox</title>\n<p>served by busybox httpd in cairn.local/busybox</p>\n"
)

// defaultPath is the PATH of the busybox image.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func (o Options) busybox(ctx context.Context) (v1.Image, error) {
	bin := o.Busybox
	if bin == "" {
		bin = "/bin/busybox"
	}
	data, err := os.ReadFile(bin)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s (install busybox-static)", ErrNoBusybox, bin)
	}
	if err != nil {
		return nil, fmt.Errorf("images: read busybox: %w", err)
	}
	out, err := exec.CommandContext(ctx, bin, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("images: %s --list-full: %w", bin, err)
	}
	entries := []entry{
		fileEntry("bin/busybox", 0o755, data),
		dirEntry("sbin", 0o755),
		dirEntry("usr/bin", 0o755),
		dirEntry("usr/sbin", 0o755),
		dirEntry("usr/local/bin", 0o755),
		dirEntry("dev", 0o755),
		dirEntry("proc", 0o555),
		dirEntry("sys", 0o555),
		dirEntry("root", 0o700),
		dirEntry("home", 0o755),
		dirEntry("tmp", 0o1777),
		dirEntry("var/tmp", 0o1777),
		dirEntry("var/log", 0o755),
		dirEntry("var/run", 0o755),
		fileEntry("etc/passwd", 0o644, []byte(passwd)),
		fileEntry("etc/group", 0o644, []byte(group)),
		fileEntry("etc/nsswitch.conf", 0o644, []byte("hosts: files dns\n")),
		fileEntry("var/www/index.html", 0o644, []byte(indexHTML)),
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	links := 0
	for sc.Scan() {
		p := strings.TrimPrefix(strings.TrimSpace(sc.Text()), "/")
		if p == "" || p == "bin/busybox" {
			continue
		}
		entries = append(entries, linkEntry(p, "/bin/busybox"))
		links++
	}
	if links == 0 {
		return nil, fmt.Errorf("images: %s --list-full listed no applets", bin)
	}
	return newImage(entries, v1.Config{
		Env:        []string{"PATH=" + defaultPath},
		Cmd:        []string{"sh"},
		WorkingDir: "/",
	}, "cairn ops/images: Debian busybox-static and applet links")
}
