// Command roster-promsd runs Prometheus' own Consul service discovery
// (github.com/prometheus/prometheus/discovery/consul) against a server and prints every
// target group it produces, one JSON line per update, with the targets Prometheus'
// relabelling (model/relabel) keeps. The configuration is Prometheus' own YAML: a
// `scrape_configs` list whose entries hold `job_name`, `consul_sd_configs` (parsed by
// Prometheus' discovery registry, as prometheus.yml is) and `relabel_configs`.
//
//	roster-promsd -config "$YAML" [-for 60s] [-trace]
//
// Output on stdout, one JSON object a line:
//
//	{"job": ..., "groups": [{"source": ..., "labels": {...}, "targets": [{...}]}],
//	 "kept": [{...}]}   an update from the discoverer; "kept" are the targets of its
//	                    groups (group labels under target labels, plus "job") that the
//	                    job's relabel_configs keep, after relabelling
//	{"http": {...}}     with -trace: each request the discoverer sent and its answer
//	                    (method, path, query, status, X-Consul-Index, milliseconds, body)
//
// The discoverer's own log (errors included) goes to stderr as JSON lines. The program
// stops when stdin closes or after -for, whichever comes first.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v2"

	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/consul"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
)

// scrapeConfig is the part of Prometheus' scrape config that discovery and relabelling
// read; its service discovery configs are inlined as in config.ScrapeConfig.
type scrapeConfig struct {
	JobName                 string            `yaml:"job_name"`
	ServiceDiscoveryConfigs discovery.Configs `yaml:"-"`
	RelabelConfigs          []*relabel.Config `yaml:"relabel_configs,omitempty"`
}

func (c *scrapeConfig) UnmarshalYAML(unmarshal func(any) error) error {
	return discovery.UnmarshalYAMLWithInlineConfigs(c, unmarshal)
}

type file struct {
	ScrapeConfigs []*scrapeConfig `yaml:"scrape_configs"`
}

var out = struct {
	sync.Mutex
	enc *json.Encoder
}{enc: json.NewEncoder(os.Stdout)}

func emit(v any) {
	out.Lock()
	defer out.Unlock()
	if err := out.enc.Encode(v); err != nil {
		fmt.Fprintln(os.Stderr, "stdout:", err)
		os.Exit(1)
	}
}

type group struct {
	Source  string           `json:"source"`
	Labels  model.LabelSet   `json:"labels"`
	Targets []model.LabelSet `json:"targets"`
}

type update struct {
	Job    string              `json:"job"`
	Groups []group             `json:"groups"`
	Kept   []map[string]string `json:"kept"`
}

// relabelled: the targets of groups that the job's relabelling keeps, as Prometheus
// builds a target's labels before relabelling (the group's labels, the target's over
// them, and the job).
func relabelled(job *scrapeConfig, groups []*targetgroup.Group) []map[string]string {
	kept := []map[string]string{}
	for _, g := range groups {
		if g == nil {
			continue
		}
		for _, t := range g.Targets {
			b := labels.NewBuilder(labels.EmptyLabels())
			for k, v := range g.Labels {
				b.Set(string(k), string(v))
			}
			for k, v := range t {
				b.Set(string(k), string(v))
			}
			b.Set(model.JobLabel, job.JobName)
			if !relabel.ProcessBuilder(b, job.RelabelConfigs...) {
				continue
			}
			kept = append(kept, b.Labels().Map())
		}
	}
	return kept
}

// tracer logs each exchange between the discoverer and the server.
type tracer struct{ next http.RoundTripper }

func (t tracer) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	entry := map[string]any{
		"method": req.Method,
		"path":   req.URL.Path,
		"query":  req.URL.RawQuery,
	}
	if err != nil {
		entry["error"] = err.Error()
	} else {
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr != nil {
			entry["error"] = rerr.Error()
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		entry["status"] = resp.StatusCode
		entry["index"] = resp.Header.Get("X-Consul-Index")
		entry["body"] = string(body)
	}
	entry["ms"] = time.Since(start).Milliseconds()
	emit(map[string]any{"http": entry})
	return resp, err
}

// traceProxy starts a reverse proxy to server (host:port or a URL) that logs each
// exchange, and returns its address.
func traceProxy(server, scheme string) (string, error) {
	if !strings.Contains(server, "://") {
		if scheme == "" {
			scheme = "http"
		}
		server = scheme + "://" + server
	}
	target, err := url.Parse(server)
	if err != nil {
		return "", err
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = tracer{http.DefaultTransport}
	proxy.FlushInterval = -1
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go http.Serve(ln, proxy) //nolint:errcheck // runs until the process ends
	return ln.Addr().String(), nil
}

func main() {
	config := flag.String("config", "", "Prometheus YAML with scrape_configs")
	limit := flag.Duration("for", time.Minute, "stop after this long")
	trace := flag.Bool("trace", false, "print each request to the server and its answer")
	flag.Parse()

	var f file
	if err := yaml.UnmarshalStrict([]byte(*config), &f); err != nil {
		fmt.Fprintln(os.Stderr, "config:", err)
		os.Exit(2)
	}
	if len(f.ScrapeConfigs) == 0 {
		fmt.Fprintln(os.Stderr, "config: no scrape_configs")
		os.Exit(2)
	}

	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), *limit)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()

	reg := prometheus.NewRegistry()
	refresh := discovery.NewRefreshMetrics(reg)
	var wg sync.WaitGroup
	for _, job := range f.ScrapeConfigs {
		for _, rc := range job.RelabelConfigs {
			if err := rc.Validate(model.UTF8Validation); err != nil {
				fmt.Fprintf(os.Stderr, "job %s: relabel_configs: %v\n", job.JobName, err)
				os.Exit(2)
			}
		}
		if len(job.ServiceDiscoveryConfigs) == 0 {
			fmt.Fprintf(os.Stderr, "job %s: no service discovery config\n", job.JobName)
			os.Exit(2)
		}
		for i, sd := range job.ServiceDiscoveryConfigs {
			cfg, ok := sd.(*consul.SDConfig)
			if !ok {
				fmt.Fprintf(os.Stderr, "job %s: %s_sd_configs: only consul_sd_configs is run\n", job.JobName, sd.Name())
				os.Exit(2)
			}
			if *trace {
				addr, err := traceProxy(cfg.Server, cfg.Scheme)
				if err != nil {
					fmt.Fprintln(os.Stderr, "trace proxy:", err)
					os.Exit(1)
				}
				copied := *cfg
				copied.Server, copied.Scheme = addr, "http"
				cfg = &copied
			}
			metrics := cfg.NewDiscovererMetrics(prometheus.WrapRegistererWith(
				prometheus.Labels{"job": job.JobName, "sd": fmt.Sprint(i)}, reg), refresh)
			if err := metrics.Register(); err != nil {
				fmt.Fprintln(os.Stderr, "metrics:", err)
				os.Exit(1)
			}
			d, err := cfg.NewDiscoverer(discovery.DiscovererOptions{
				Logger:  logger.With("job", job.JobName),
				Metrics: metrics,
				SetName: job.JobName,
			})
			if err != nil {
				fmt.Fprintf(os.Stderr, "job %s: %v\n", job.JobName, err)
				os.Exit(2)
			}
			ch := make(chan []*targetgroup.Group)
			wg.Add(1)
			go func() {
				defer wg.Done()
				d.Run(ctx, ch)
			}()
			go func(job *scrapeConfig) {
				for groups := range ch {
					u := update{Job: job.JobName, Groups: []group{}, Kept: relabelled(job, groups)}
					for _, g := range groups {
						if g == nil {
							continue
						}
						ts := g.Targets
						if ts == nil {
							ts = []model.LabelSet{}
						}
						u.Groups = append(u.Groups, group{Source: g.Source, Labels: g.Labels, Targets: ts})
					}
					emit(u)
				}
			}(job)
		}
	}
	<-ctx.Done()
	wg.Wait()
}
