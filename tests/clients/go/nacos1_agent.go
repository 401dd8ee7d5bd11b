package main

// The HTTP agent the nacos-sdk-go v1 clients of the nacos1 scenario send through: the
// SDK's own agent, behind a look at every request. It refuses (never sends) a request
// that names an address outside loopback in `ip`, `clientIP` or a beat, so the scenario
// can never make roster register or push to another network; and it counts what the SDK
// sends (list queries, beats, held config long polls) and what login answered, which is
// how the scenario tells a UDP push from the SDK's polling.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/nacos-group/nacos-sdk-go/common/http_agent"
)

type nacos1Agent struct {
	inner http_agent.HttpAgent

	mu        sync.Mutex
	lists     int    // GET /v1/ns/instance/list: the SDK's queries and polls
	clientIP  string // what the last list query announced
	udpPort   string
	beats     int // PUT /v1/ns/instance/beat
	heldPolls int // config long polls that may be held (no Long-Pulling-Timeout-No-Hangup)
	login     string
	refused   string // the first request refused for its address
}

type nacos1Counts struct {
	lists, beats, heldPolls int
	clientIP, udpPort       string
	login, refused          string
}

func (a *nacos1Agent) counts() nacos1Counts {
	a.mu.Lock()
	defer a.mu.Unlock()
	return nacos1Counts{a.lists, a.beats, a.heldPolls, a.clientIP, a.udpPort, a.login, a.refused}
}

// loopbackOrEmpty accepts "" (nothing named) and loopback IPs, nothing else.
func loopbackOrEmpty(value string) bool {
	if value == "" {
		return true
	}
	ip := net.ParseIP(value)
	return ip != nil && ip.IsLoopback()
}

// look checks and counts one request before it is sent.
func (a *nacos1Agent) look(path string, header http.Header, params map[string]string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, value := range params {
		bad := false
		switch strings.ToLower(key) {
		case "ip", "clientip":
			bad = !loopbackOrEmpty(value)
		case "beat":
			var beat struct {
				IP string `json:"ip"`
			}
			bad = json.Unmarshal([]byte(value), &beat) != nil || !loopbackOrEmpty(beat.IP)
		}
		if bad {
			reason := fmt.Sprintf("refused to send %s: %s=%q is not a loopback address", path, key, value)
			if a.refused == "" {
				a.refused = reason
			}
			return fmt.Errorf("%s", reason)
		}
	}
	switch {
	case strings.HasSuffix(path, "/v1/ns/instance/list"):
		a.lists++
		a.clientIP, a.udpPort = params["clientIP"], params["udpPort"]
	case strings.HasSuffix(path, "/v1/ns/instance/beat"):
		a.beats++
	case strings.HasSuffix(path, "/v1/cs/configs/listener"):
		if !headerSet(header, "Long-Pulling-Timeout-No-Hangup") {
			a.heldPolls++
		}
	}
	return nil
}

func headerSet(header http.Header, name string) bool {
	for key, values := range header {
		if strings.EqualFold(key, name) && len(values) > 0 && values[0] != "" {
			return true
		}
	}
	return false
}

// path is the URL without its query (the SDK appends GET and DELETE parameters itself).
func pathOf(url string) string {
	if i := strings.IndexByte(url, '?'); i >= 0 {
		return url[:i]
	}
	return url
}

func (a *nacos1Agent) Get(url string, header http.Header, timeoutMs uint64, params map[string]string) (*http.Response, error) {
	if err := a.look(pathOf(url), header, params); err != nil {
		return nil, err
	}
	return a.inner.Get(url, header, timeoutMs, params)
}

// Post is what the SDK logs in with: the answer is kept for the report.
func (a *nacos1Agent) Post(url string, header http.Header, timeoutMs uint64, params map[string]string) (*http.Response, error) {
	if err := a.look(pathOf(url), header, params); err != nil {
		return nil, err
	}
	resp, err := a.inner.Post(url, header, timeoutMs, params)
	if err == nil && strings.HasSuffix(pathOf(url), "/auth/users/login") {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		a.mu.Lock()
		a.login = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		if resp.StatusCode == 200 {
			a.login = "200"
		}
		a.mu.Unlock()
	}
	return resp, err
}

func (a *nacos1Agent) Delete(url string, header http.Header, timeoutMs uint64, params map[string]string) (*http.Response, error) {
	if err := a.look(pathOf(url), header, params); err != nil {
		return nil, err
	}
	return a.inner.Delete(url, header, timeoutMs, params)
}

func (a *nacos1Agent) Put(url string, header http.Header, timeoutMs uint64, params map[string]string) (*http.Response, error) {
	if err := a.look(pathOf(url), header, params); err != nil {
		return nil, err
	}
	return a.inner.Put(url, header, timeoutMs, params)
}

func (a *nacos1Agent) Request(method, url string, header http.Header, timeoutMs uint64, params map[string]string) (*http.Response, error) {
	if err := a.look(pathOf(url), header, params); err != nil {
		return nil, err
	}
	return a.inner.Request(method, url, header, timeoutMs, params)
}

func (a *nacos1Agent) RequestOnlyResult(method, url string, header http.Header, timeoutMs uint64, params map[string]string) string {
	if a.look(pathOf(url), header, params) != nil {
		return ""
	}
	return a.inner.RequestOnlyResult(method, url, header, timeoutMs, params)
}
