package main

// The consul scenario: HashiCorp's Go client (github.com/hashicorp/consul/api) against
// roster's Consul face, as a service registers itself with a TTL check and keeps it
// passing, and as a watcher blocks on the health of its service.
//
//	roster-goclients consul -addr 127.0.0.1:P -token T -service S -id ID -ip 127.x.y.z \
//	    -port N -other-ip 127.x.y.w
//
// Steps, in order (the Rust test acts between them: a step marked "waits" reads one line
// from stdin before going on, so the test can judge the other faces or register through
// them meanwhile):
//
//	registered        ServiceRegister with a 3 s TTL check, tags and Meta
//	critical_first    before any pass: absent from Health().Service(passing); its check
//	                  is critical
//	passing           after PassTTL: listed by Health().Service(passing); a keeper goroutine
//	                  passes every second from now on
//	views             Catalog().Service, Catalog().Services, Agent().Services     (waits)
//	warning           WarnTTL: the check is warning and the passing list lacks it; then
//	                  UpdateTTL(passing) until passing again
//	blocking          the index a blocking Health().Service will wait on, and when
//	                  (unix ms)
//	unblocked         when the blocking query returned, its index and entries (the test
//	                  registers -other-ip through Nacos meanwhile)
//	quiet             a 2 s blocking query on the unchanged service: how long it took,
//	                  the index before and after
//	stopped_passing   the keeper stops (unix ms of its last pass)                   (waits)
//	critical          Health().Service shows the check critical; how long after the last
//	                  pass                                                          (waits)
//	deregistered      ServiceDeregister: gone from Agent().Services and Health().Service
import (
	"bufio"
	"flag"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	consul "github.com/hashicorp/consul/api"
)

func init() { scenarios["consul"] = consulScenario }

// consulEntry is what the steps report of one health entry.
func consulEntry(e *consul.ServiceEntry) map[string]any {
	checks := map[string]string{}
	for _, c := range e.Checks {
		checks[c.CheckID] = c.Status
	}
	return map[string]any{
		"id": e.Service.ID, "service": e.Service.Service, "address": e.Service.Address,
		"port": e.Service.Port, "tags": e.Service.Tags, "meta": e.Service.Meta,
		"node": e.Node.Node, "checks": checks, "aggregated": e.Checks.AggregatedStatus(),
	}
}

func consulScenario(args []string) {
	fs := flag.NewFlagSet("consul", flag.ExitOnError)
	addr := fs.String("addr", "", "roster's HTTP address (host:port)")
	token := fs.String("token", "", "an API token (X-Consul-Token)")
	service := fs.String("service", "", "the service name")
	id := fs.String("id", "", "the service ID")
	ip := fs.String("ip", "", "the instance address (loopback)")
	port := fs.Int("port", 0, "the instance port")
	otherIP := fs.String("other-ip", "", "the address the test registers through Nacos while the client blocks")
	fs.Parse(args)
	if !strings.HasPrefix(*ip, "127.") || !strings.HasPrefix(*otherIP, "127.") {
		fail("args", "not loopback: %q %q", *ip, *otherIP)
	}
	watchdog(150 * time.Second)
	stdin := bufio.NewReader(os.Stdin)
	waitLine := func(name string) {
		if _, err := stdin.ReadString('\n'); err != nil {
			fail(name, "stdin: %v", err)
		}
	}

	cfg := consul.DefaultConfig()
	cfg.Address = *addr
	cfg.Token = *token
	client, err := consul.NewClient(cfg)
	check("client", err)
	agent, health, catalog := client.Agent(), client.Health(), client.Catalog()
	checkID := "service:" + *id

	// find answers our entry of a health list, or nil.
	find := func(entries []*consul.ServiceEntry, ip string) *consul.ServiceEntry {
		for _, e := range entries {
			if e.Service.Address == ip {
				return e
			}
		}
		return nil
	}
	healthOf := func(passing bool) ([]*consul.ServiceEntry, uint64, string) {
		entries, meta, err := health.Service(*service, "", passing, nil)
		if err != nil {
			return nil, 0, err.Error()
		}
		return entries, meta.LastIndex, ""
	}

	check("registered", agent.ServiceRegister(&consul.AgentServiceRegistration{
		ID: *id, Name: *service, Address: *ip, Port: *port,
		Tags: []string{"go", "tier=api"},
		Meta: map[string]string{"version": "1", "lang": "go"},
		Check: &consul.AgentServiceCheck{
			TTL: "3s", DeregisterCriticalServiceAfter: "10m",
		},
	}))
	step("registered", map[string]any{"id": *id, "check_id": checkID})

	// Consul's TTL checks start critical: not passing before the first pass.
	// (Listed once the registration is in the catalog, as a Consul agent's anti-entropy
	// gets it there.)
	var all []*consul.ServiceEntry
	var errText string
	_, reason := waitFor(5*time.Second, func() string {
		all, _, errText = healthOf(false)
		if errText != "" {
			return errText
		}
		if find(all, *ip) == nil {
			return "not in Health().Service at all"
		}
		return ""
	})
	if reason != "" {
		fail("critical_first", "%s", reason)
	}
	mine := find(all, *ip)
	passing, _, errText := healthOf(true)
	if errText != "" {
		fail("critical_first", "%s", errText)
	}
	step("critical_first", map[string]any{
		"listed_passing": find(passing, *ip) != nil, "entry": consulEntry(mine),
	})

	check("passing", agent.PassTTL(checkID, "ok"))
	took, reason := waitFor(5*time.Second, func() string {
		passing, _, errText := healthOf(true)
		if errText != "" {
			return errText
		}
		if find(passing, *ip) == nil {
			return "not passing yet"
		}
		return ""
	})
	if reason != "" {
		fail("passing", "%s", reason)
	}
	// The keeper: a pass every second while keep is set.
	var keep atomic.Bool
	var lastPass atomic.Int64
	keep.Store(true)
	var stopKeeper sync.WaitGroup
	done := make(chan struct{})
	stopKeeper.Add(1)
	go func() {
		defer stopKeeper.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Second):
			}
			if keep.Load() {
				if err := agent.PassTTL(checkID, "ok"); err == nil {
					lastPass.Store(time.Now().UnixMilli())
				}
			}
		}
	}()
	step("passing", map[string]any{"took_ms": took.Milliseconds()})

	entries, _, err := catalog.Service(*service, "", nil)
	check("views", err)
	var entry *consul.CatalogService
	for _, e := range entries {
		if e.ServiceID == *id {
			entry = e
		}
	}
	if entry == nil {
		fail("views", "Catalog().Service lacks %s: %v", *id, entries)
	}
	services, _, err := catalog.Services(nil)
	check("views", err)
	agentServices, err := agent.Services()
	check("views", err)
	own, ok := agentServices[*id]
	if !ok {
		fail("views", "Agent().Services lacks %s", *id)
	}
	step("views", map[string]any{
		"catalog": map[string]any{
			"service": entry.ServiceName, "address": entry.ServiceAddress, "port": entry.ServicePort,
			"tags": entry.ServiceTags, "meta": entry.ServiceMeta, "node": entry.Node,
			"datacenter": entry.Datacenter,
		},
		"services_tags": services[*service],
		"agent": map[string]any{
			"service": own.Service, "address": own.Address, "port": own.Port,
			"tags": own.Tags, "meta": own.Meta,
		},
	})
	waitLine("views")

	// Warning: listed with a warning check, no longer among the passing.
	keep.Store(false)
	check("warning", agent.WarnTTL(checkID, "slow"))
	var warned map[string]any
	_, reason = waitFor(2*time.Second, func() string {
		passing, _, errText := healthOf(true)
		if errText != "" {
			return errText
		}
		all, _, errText := healthOf(false)
		if errText != "" {
			return errText
		}
		e := find(all, *ip)
		if e == nil {
			return "not listed"
		}
		warned = consulEntry(e)
		if find(passing, *ip) != nil {
			return "still passing"
		}
		if warned["checks"].(map[string]string)[checkID] != "warning" {
			return "not warning"
		}
		return ""
	})
	if reason != "" {
		fail("warning", "%s: %v", reason, warned)
	}
	// Back to passing through the update endpoint, as a client reporting its state does.
	check("warning", agent.UpdateTTL(checkID, "ok", consul.HealthPassing))
	keep.Store(true)
	_, reason = waitFor(5*time.Second, func() string {
		passing, _, errText := healthOf(true)
		if errText != "" {
			return errText
		}
		if find(passing, *ip) == nil {
			return "not passing again"
		}
		return ""
	})
	if reason != "" {
		fail("warning", "%s", reason)
	}
	step("warning", map[string]any{"entry": warned})

	// A watcher's blocking query: it returns when another instance registers.
	_, meta, err := health.Service(*service, "", false, nil)
	check("blocking", err)
	index := meta.LastIndex
	step("blocking", map[string]any{"index": index, "at_ms": time.Now().UnixMilli()})
	entries2, meta, err := health.Service(*service, "", false,
		&consul.QueryOptions{WaitIndex: index, WaitTime: 20 * time.Second})
	returned := time.Now().UnixMilli()
	check("unblocked", err)
	reported := []map[string]any{}
	for _, e := range entries2 {
		reported = append(reported, consulEntry(e))
	}
	sort.Slice(reported, func(i, j int) bool {
		return reported[i]["address"].(string) < reported[j]["address"].(string)
	})
	step("unblocked", map[string]any{
		"at_ms": returned, "index": meta.LastIndex, "entries": reported,
	})

	// Nothing changes (the keeper's passes change nothing): a short wait runs out, with
	// the same index.
	_, meta, err = health.Service(*service, "", false, nil)
	check("quiet", err)
	before := meta.LastIndex
	start := time.Now()
	_, meta, err = health.Service(*service, "", false,
		&consul.QueryOptions{WaitIndex: before, WaitTime: 2 * time.Second})
	check("quiet", err)
	step("quiet", map[string]any{
		"took_ms": time.Since(start).Milliseconds(), "index_before": before, "index_after": meta.LastIndex,
	})

	// The client stops passing, as a hung process does.
	keep.Store(false)
	close(done)
	stopKeeper.Wait()
	step("stopped_passing", map[string]any{"last_pass_ms": lastPass.Load()})
	var lapsed map[string]any
	_, reason = waitFor(15*time.Second, func() string {
		all, _, errText := healthOf(false)
		if errText != "" {
			return errText
		}
		e := find(all, *ip)
		if e == nil {
			return "not listed"
		}
		lapsed = consulEntry(e)
		if lapsed["checks"].(map[string]string)[checkID] != "critical" {
			return "not critical"
		}
		return ""
	})
	if reason != "" {
		fail("critical", "%s: %v", reason, lapsed)
	}
	step("critical", map[string]any{
		"after_last_pass_ms": time.Now().UnixMilli() - lastPass.Load(), "entry": lapsed,
	})
	waitLine("critical")

	check("deregistered", agent.ServiceDeregister(*id))
	agentServices, err = agent.Services()
	check("deregistered", err)
	if _, ok := agentServices[*id]; ok {
		fail("deregistered", "Agent().Services still has %s", *id)
	}
	all, _, errText = healthOf(false)
	if errText != "" {
		fail("deregistered", "%s", errText)
	}
	if find(all, *ip) != nil {
		fail("deregistered", "Health().Service still lists %s", *ip)
	}
	step("deregistered", nil)
}
