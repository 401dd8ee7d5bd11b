package main

// The go-micro scenario: traffic colouring with version priority lanes, in go-micro and in
// roster, compared.
//
// Two versions of one go-micro service (v1.2 and master; real go-micro servers on
// loopback addresses) register through a go-micro registry over nacos-sdk-go v2
// (micronacos). A go-micro client wrapper routes a call by its colouring header X-Lanes
// ("v1.2,master": the first version listed that has a node, else the nodes without a
// version, as roster's lanes) through a selector filter; the same service asked of
// roster's /api/v1/pick with lanes=v1.2,master (the service's lane key set to "version")
// must name the same instance, before and after the preferred version goes away, and after
// it comes back.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"go-micro.dev/v4/broker"
	"go-micro.dev/v4/client"
	"go-micro.dev/v4/errors"
	"go-micro.dev/v4/logger"
	"go-micro.dev/v4/metadata"
	"go-micro.dev/v4/registry"
	"go-micro.dev/v4/selector"
	"go-micro.dev/v4/server"

	"roster.test/goclients/micronacos"
)

func init() { scenarios["micro"] = runMicro }

// microLaneHeader carries a request's colour: a priority list of versions.
const microLaneHeader = "X-Lanes"

// MicroLane is the handler both versions serve (go-micro names endpoints after the type:
// "MicroLane.Which").
type MicroLane struct {
	version string
	address func() string
	dead    atomic.Bool
}

// MicroWhichRequest asks a node who it is.
type MicroWhichRequest struct{}

// MicroWhichReply is the node's version and address, and the colour the call carried
// when it arrived (go-micro passes metadata on as headers).
type MicroWhichReply struct {
	Version string `json:"version"`
	Address string `json:"address"`
	Lanes   string `json:"lanes"`
}

// Which answers the serving node's version and address.
func (h *MicroLane) Which(ctx context.Context, _ *MicroWhichRequest, rsp *MicroWhichReply) error {
	if h.dead.Load() {
		return errors.InternalServerError("micro", "%s has crashed", h.version)
	}
	rsp.Version = h.version
	rsp.Address = h.address()
	rsp.Lanes, _ = metadata.Get(ctx, microLaneHeader)
	return nil
}

// microLanes is the client wrapper: a call whose context carries X-Lanes goes through a
// selector filter for those lanes.
type microLanes struct{ client.Client }

func (c *microLanes) Call(ctx context.Context, req client.Request, rsp interface{}, opts ...client.CallOption) error {
	if lanes, ok := metadata.Get(ctx, microLaneHeader); ok {
		opts = append(opts, client.WithSelectOption(selector.WithFilter(microLaneFilter(lanes))))
	}
	return c.Client.Call(ctx, req, rsp, opts...)
}

// microLaneFilter keeps the nodes of the first listed version that has any, else the
// nodes without a version (the base lane); the registry answers only healthy nodes.
func microLaneFilter(lanes string) selector.Filter {
	return func(services []*registry.Service) []*registry.Service {
		byLane := map[string][]*registry.Service{}
		for _, s := range services {
			for _, n := range s.Nodes {
				v, ok := n.Metadata["version"]
				if !ok {
					v = s.Version
				}
				c := *s
				c.Nodes = []*registry.Node{n}
				byLane[v] = append(byLane[v], &c)
			}
		}
		for _, lane := range strings.Split(lanes, ",") {
			if lane = strings.TrimSpace(lane); lane != "" && len(byLane[lane]) > 0 {
				return byLane[lane]
			}
		}
		return byLane[""]
	}
}

// microStderrLogger is go-micro's logger, printing to stderr.
type microStderrLogger struct{ logger.Logger }

func (l microStderrLogger) Log(level logger.Level, v ...interface{}) {
	if l.Options().Level.Enabled(level) {
		fmt.Fprintln(os.Stderr, append([]interface{}{level.String()}, v...)...)
	}
}

func (l microStderrLogger) Logf(level logger.Level, format string, v ...interface{}) {
	if l.Options().Level.Enabled(level) {
		fmt.Fprintf(os.Stderr, level.String()+" "+format+"\n", v...)
	}
}

func (l microStderrLogger) Fields(fields map[string]interface{}) logger.Logger {
	return microStderrLogger{l.Logger.Fields(fields)}
}

// microNode is one go-micro service process's worth: its registry connection and server.
type microNode struct {
	version string
	reg     registry.Registry
	srv     server.Server
	handler *MicroLane
}

type microRun struct {
	serverAddr, user, pass, tmp string
}

func (m *microRun) registry(name string) registry.Registry {
	dir := m.tmp + "/" + name
	reg, err := micronacos.NewRegistry(
		registry.Addrs(m.serverAddr),
		registry.Timeout(10*time.Second),
		micronacos.WithClientConfig(constant.ClientConfig{
			Username:            m.user,
			Password:            m.pass,
			NotLoadCacheAtStart: true,
			LogDir:              dir + "/log",
			CacheDir:            dir + "/cache",
			LogLevel:            "warn",
		}),
	)
	check("registry "+name, err)
	return reg
}

// start runs one version as a go-micro server on host (a free port), registered.
func (m *microRun) start(service, version, host string) *microNode {
	reg := m.registry(version + "-" + host)
	srv := server.NewServer(
		server.Name(service),
		server.Version(version),
		server.Id(version+"-"+host),
		server.Address(net.JoinHostPort(host, "0")),
		server.Registry(reg),
		server.Broker(broker.NewMemoryBroker()),
		server.RegisterTTL(time.Minute),
		server.RegisterInterval(30*time.Second),
	)
	h := &MicroLane{version: version}
	h.address = func() string { return srv.Options().Address }
	check("handler "+version, srv.Handle(srv.NewHandler(h)))
	check("start "+version, srv.Start())
	return &microNode{version: version, reg: reg, srv: srv, handler: h}
}

// stop ends a version as a deployment stops it: go-micro deregisters and closes the
// listener, then the registry connection closes.
func (n *microNode) stop() {
	check("stop "+n.version, n.srv.Stop())
	micronacos.Close(n.reg)
}

// crash ends a version as a killed process ends: its registry connection drops first,
// with no deregistration (roster removes a connection's instances when it closes), then
// the server stops (its own deregistration then fails on the closed client: logged).
// go-micro's Stop closes the listener but not the connections it accepted, which the
// callers' connection pool goes on using; a dead process answers nothing, so from here
// the handler fails every call that still reaches it.
func (n *microNode) crash() {
	n.handler.dead.Store(true)
	micronacos.Close(n.reg)
	_ = n.srv.Stop()
}

func (n *microNode) addr() string { return n.srv.Options().Address }

// microPicked is roster's pick: the instance and the lane that served.
type microPicked struct {
	IP       string            `json:"ip"`
	Port     int               `json:"port"`
	Lane     string            `json:"lane"`
	Metadata map[string]string `json:"metadata"`
}

func (p microPicked) addr() string { return net.JoinHostPort(p.IP, fmt.Sprint(p.Port)) }

func runMicro(args []string) {
	fs := flag.NewFlagSet("micro", flag.ExitOnError)
	serverAddr := fs.String("server", "127.0.0.1:8848", "roster HTTP address")
	user := fs.String("username", "nacos", "user")
	pass := fs.String("password", "", "password")
	service := fs.String("service", fmt.Sprintf("micro-lanes-%d", os.Getpid()), "service name")
	lanes := fs.String("lanes", "v1.2,master", "the colour: versions by priority")
	preferredHost := fs.String("preferred-host", "127.0.41.1", "loopback address of the first listed version")
	fallbackHost := fs.String("fallback-host", "127.0.41.2", "loopback address of the second listed version")
	fs.Parse(args)
	watchdog(100 * time.Second)
	// go-micro's default logger prints to stdout whatever its options say; stdout is
	// for the steps.
	logger.DefaultLogger = microStderrLogger{logger.NewLogger()}

	listed := strings.Split(*lanes, ",")
	if len(listed) != 2 {
		fail("flags", "-lanes must list two versions, got %q", *lanes)
	}
	preferred, fallback := listed[0], listed[1]
	tmp, err := os.MkdirTemp("", "roster-micro-")
	check("tmp", err)
	defer os.RemoveAll(tmp)
	run := &microRun{serverAddr: *serverAddr, user: *user, pass: *pass, tmp: tmp}
	api := newRosterHTTP(*serverAddr, *user, *pass)

	// roster's lanes read the service's lane key; the instances name their version.
	_, err = api.must("POST", "/nacos/v1/ns/service", url.Values{
		"serviceName": {*service}, "laneKey": {"version"}, "protectThreshold": {"0"},
	})
	check("lane_key", err)
	step("lane_key", map[string]any{"service": *service, "laneKey": "version"})

	nodes := map[string]*microNode{
		fallback:  run.start(*service, fallback, *fallbackHost),
		preferred: run.start(*service, preferred, *preferredHost),
	}
	registered := func() string {
		hosts, err := api.instances("", "", *service)
		if err != nil {
			return err.Error()
		}
		for _, n := range nodes {
			if n != nil && !hosts[n.addr()] {
				return fmt.Sprintf("%s (%s) not listed healthy: %v", n.version, n.addr(), hosts)
			}
		}
		return ""
	}
	if took, why := waitFor(15*time.Second, registered); why != "" {
		fail("registered", "%s", why)
	} else {
		step("registered", map[string]any{
			preferred: nodes[preferred].addr(), fallback: nodes[fallback].addr(),
			"ms": took.Milliseconds(),
		})
	}

	// The caller: a go-micro client with the default (caching) selector over its own
	// registry connection, wrapped by the lane router.
	creg := run.registry("client")
	defer micronacos.Close(creg)
	var cl client.Client = &microLanes{client.NewClient(
		client.Registry(creg),
		client.Selector(selector.NewSelector(selector.Registry(creg))),
		client.Retries(1),
		client.RequestTimeout(5*time.Second),
		client.DialTimeout(2*time.Second),
	)}
	call := func(colour *string) (MicroWhichReply, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
		defer cancel()
		if colour != nil {
			ctx = metadata.NewContext(ctx, metadata.Metadata{microLaneHeader: *colour})
		}
		var rsp MicroWhichReply
		err := cl.Call(ctx, cl.NewRequest(*service, "MicroLane.Which", &MicroWhichRequest{}), &rsp)
		return rsp, err
	}
	pick := func(colour string) (microPicked, error) {
		var p microPicked
		body, err := api.must("GET", "/api/v1/pick", url.Values{"serviceName": {*service}, "lanes": {colour}})
		if err != nil {
			return p, err
		}
		err = json.Unmarshal([]byte(body), &p)
		return p, err
	}

	// compare makes n coloured calls, which must all reach one node, and asks roster's
	// pick for the same lanes: both must name wantVersion's node.
	compare := func(name, colour, wantVersion string, calls int) {
		seen := map[string]int{}
		var last MicroWhichReply
		for i := 0; i < calls; i++ {
			rsp, err := call(&colour)
			check(name, err)
			if rsp.Lanes != colour {
				fail(name, "the node saw lanes %q, the caller sent %q", rsp.Lanes, colour)
			}
			seen[rsp.Version+" "+rsp.Address]++
			last = rsp
		}
		want := nodes[wantVersion]
		if len(seen) != 1 || last.Version != wantVersion || last.Address != want.addr() {
			fail(name, "go-micro calls coloured %q reached %v, want only %s at %s", colour, seen, wantVersion, want.addr())
		}
		p, err := pick(colour)
		check(name, err)
		if p.addr() != last.Address || p.Lane != last.Version || p.Metadata["version"] != last.Version {
			fail(name, "roster's pick with lanes=%s is %s (lane %q), go-micro chose %s at %s", colour, p.addr(), p.Lane, last.Version, last.Address)
		}
		step(name, map[string]any{
			"lanes": colour, "calls": calls, "micro_version": last.Version, "micro_addr": last.Address,
			"pick_lane": p.Lane, "pick_addr": p.addr(),
		})
	}

	// The first call fills the client's registry cache, which then starts watching the
	// service; a change before the watch is subscribed would reach the cache only when
	// its entry expires (a minute), so wait for it, as a long-running caller has it.
	if _, err := call(nil); err != nil {
		fail("watching", "first call: %v", err)
	}
	if took, why := waitFor(10*time.Second, func() string {
		if !micronacos.Watching(creg, *service) {
			return "the client's registry cache does not watch the service"
		}
		return ""
	}); why != "" {
		fail("watching", "%s", why)
	} else {
		step("watching", map[string]any{"ms": took.Milliseconds()})
	}

	// Uncoloured calls are go-micro's plain random choice over both versions: the filter
	// is what keeps coloured ones on a lane.
	spread := map[string]int{}
	for i := 0; i < 40; i++ {
		rsp, err := call(nil)
		check("uncoloured", err)
		spread[rsp.Version]++
	}
	if spread[preferred] == 0 || spread[fallback] == 0 {
		fail("uncoloured", "40 uncoloured calls reached %v, want both versions", spread)
	}
	step("uncoloured", map[string]any{"calls": spread})

	compare("coloured", *lanes, preferred, 10)
	compare("unknown_lane_first", "hotfix,"+fallback, fallback, 10)

	// The preferred version dies: its registry connection drops without a
	// deregistration, roster removes the connection's instance and pushes the change to
	// the caller's subscription, the caller's registry cache drops the node, and its
	// coloured calls fall back to the next lane. Calls made before the cache learns of
	// the change may fail (the node is gone); count them.
	stopped := nodes[preferred].addr()
	crashed := time.Now()
	nodes[preferred].crash()
	nodes[preferred] = nil
	failed := 0
	_, why := waitFor(20*time.Second, func() string {
		rsp, err := call(lanes)
		if err != nil {
			failed++
			return err.Error()
		}
		if rsp.Version != fallback {
			return fmt.Sprintf("still reaching %s at %s", rsp.Version, rsp.Address)
		}
		return ""
	})
	if why != "" {
		fail("fallback", "coloured calls did not fall back within 20 s: %s", why)
	}
	fellBack := time.Since(crashed)
	if hosts, err := api.instances("", "", *service); err != nil || len(hosts) != 1 {
		fail("fallback", "roster lists %v (%v), want only %s", hosts, err, fallback)
	}
	compare("fallback", *lanes, fallback, 10)
	step("fallback_took", map[string]any{"stopped": stopped, "ms": fellBack.Milliseconds(), "failed_calls": failed})

	// It comes back (a new process, a new port): the watch adds it and coloured calls
	// return to it.
	nodes[preferred] = run.start(*service, preferred, *preferredHost)
	took, why := waitFor(20*time.Second, func() string {
		rsp, err := call(lanes)
		if err != nil {
			return err.Error()
		}
		if rsp.Version != preferred {
			return fmt.Sprintf("still reaching %s at %s", rsp.Version, rsp.Address)
		}
		return ""
	})
	if why != "" {
		fail("recovered", "coloured calls did not return to %s within 20 s: %s", preferred, why)
	}
	compare("recovered", *lanes, preferred, 10)
	step("recovered_took", map[string]any{"ms": took.Milliseconds()})

	for _, n := range nodes {
		n.stop()
	}
	step("done", nil)
}
