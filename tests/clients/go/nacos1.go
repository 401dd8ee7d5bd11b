package main

// The nacos-sdk-go v1 scenario (v1.1.6: HTTP, UDP push, auth on): nacos1-flow registers
// an instance that beats, subscribes (UDP push), hears a registration and a
// deregistration made over plain HTTP, selects and reads the service, publishes, reads,
// listens to (the HTTP long poll) and deletes a configuration, and deregisters.
//
// Where pushes go: the v1 SDK announces `clientIP` as the first IPv4 address of a
// non-loopback interface (util.LocalIP), and roster honours an admin's clientIP. So the
// scenario filters every IPv4 network out of that choice with the SDK's own
// util.SetFilterNetNumberAndMask before any call: the SDK then announces an empty
// clientIP, and roster pushes to the address the query came from, 127.0.0.1. The
// nacos1Agent the SDK sends through refuses any request that names a non-loopback
// address, so nothing can go elsewhere whatever the SDK picks.

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nacos-group/nacos-sdk-go/clients/config_client"
	"github.com/nacos-group/nacos-sdk-go/clients/nacos_client"
	"github.com/nacos-group/nacos-sdk-go/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/common/constant"
	"github.com/nacos-group/nacos-sdk-go/model"
	"github.com/nacos-group/nacos-sdk-go/util"
	"github.com/nacos-group/nacos-sdk-go/vo"
)

func init() {
	scenarios["nacos1-flow"] = runNacos1Flow
}

const (
	nacos1Group = "DEFAULT_GROUP"
	// The instance's own beat settings (ms), shorter than Nacos' 5 s / 15 s so that the
	// run waits past the timeout in seconds.
	nacos1BeatInterval = 1000
	nacos1BeatTimeout  = 4000
)

// nacos1Run is one run: the SDK's clients, the plain HTTP face, and the temporary
// directory that holds the SDK's caches and logs.
type nacos1Run struct {
	server, namespace, service string
	tmp                        string
	agent                      *nacos1Agent
	naming                     *naming_client.NamingClient
	config                     *config_client.ConfigClient
	http                       *rosterHTTP
}

// fail reports the failed step (and any request nacos1Agent refused to send) with the
// tail of the SDK's log on stderr, removes the temporary directory and ends the run.
func (n *nacos1Run) fail(name, format string, args ...any) {
	if refused := n.agent.counts().refused; refused != "" {
		format, args = format+" (nacos1Agent %s)", append(args, refused)
	}
	if log, err := os.ReadFile(filepath.Join(n.tmp, "log", constant.LOG_FILE_NAME)); err == nil {
		if len(log) > 6000 {
			log = log[len(log)-6000:]
		}
		fmt.Fprintf(os.Stderr, "--- nacos-sdk-go log (tail)\n%s\n", log)
	}
	os.RemoveAll(n.tmp)
	fail(name, format, args...)
}

func (n *nacos1Run) check(name string, err error) {
	if err != nil {
		n.fail(name, "%v", err)
	}
}

// client is what clients.CreateNamingClient builds, with nacos1Agent as its HTTP agent.
func (n *nacos1Run) client(username, password string) (*nacos_client.NacosClient, error) {
	host, port, err := net.SplitHostPort(n.server)
	if err != nil {
		return nil, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, err
	}
	nc := &nacos_client.NacosClient{}
	if err := nc.SetClientConfig(constant.ClientConfig{
		NamespaceId:         n.namespace,
		TimeoutMs:           5000,
		NotLoadCacheAtStart: true,
		CacheDir:            filepath.Join(n.tmp, "cache"),
		LogDir:              filepath.Join(n.tmp, "log"),
		LogLevel:            "info",
		Username:            username,
		Password:            password,
	}); err != nil {
		return nil, err
	}
	if err := nc.SetServerConfig([]constant.ServerConfig{{IpAddr: host, Port: p}}); err != nil {
		return nil, err
	}
	if err := nc.SetHttpAgent(n.agent); err != nil {
		return nil, err
	}
	return nc, nil
}

func (n *nacos1Run) params(kv ...string) url.Values {
	v := url.Values{}
	if n.namespace != "" {
		v.Set("namespaceId", n.namespace)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

// nacos1Heard keeps what the subscription callback was told, newest last.
type nacos1Heard struct {
	mu    sync.Mutex
	lists [][]model.SubscribeService
}

func (h *nacos1Heard) add(services []model.SubscribeService) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lists = append(h.lists, services)
}

func (h *nacos1Heard) latest() (int, map[string]model.SubscribeService) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hosts := map[string]model.SubscribeService{}
	if len(h.lists) == 0 {
		return 0, hosts
	}
	for _, s := range h.lists[len(h.lists)-1] {
		hosts[fmt.Sprintf("%s:%d", s.Ip, s.Port)] = s
	}
	return len(h.lists), hosts
}

func runNacos1Flow(args []string) {
	fs := flag.NewFlagSet("nacos1-flow", flag.ExitOnError)
	server := fs.String("server", "", "HTTP address of the node (host:port)")
	username := fs.String("username", "nacos", "user")
	password := fs.String("password", "", "password")
	namespace := fs.String("namespace", "", "namespace id (empty: public)")
	service := fs.String("service", "go1-orders", "service name")
	_ = fs.Parse(args)
	if *server == "" || *password == "" {
		fail("args", "--server and --password are required")
	}
	watchdog(50 * time.Second)

	// Before any call: the SDK announces no address of any network (see above).
	check("announce", util.SetFilterNetNumberAndMask("0.0.0.0/0"))
	if ip := util.LocalIP(); ip != "" {
		fail("announce", "the SDK would still announce clientIP %s", ip)
	}
	step("announce", map[string]any{"clientIP": ""})

	tmp, err := os.MkdirTemp("", "roster-nacos1-")
	check("setup", err)
	n := &nacos1Run{
		server:    *server,
		namespace: *namespace,
		service:   *service,
		tmp:       tmp,
		agent:     &nacos1Agent{},
		http:      newRosterHTTP(*server, *username, *password),
	}
	nc, err := n.client(*username, *password)
	n.check("setup", err)
	naming, err := naming_client.NewNamingClient(nc)
	n.check("setup", err)
	n.naming = &naming
	cc, err := n.client(*username, *password)
	n.check("setup", err)
	n.config, err = config_client.NewConfigClient(cc)
	n.check("setup", err)

	port := uint64(20000 + os.Getpid()%20000)
	n.register(port)
	n.beats(port)
	heard := n.subscribe(port)
	n.pushes(heard, port+1)
	n.selects(port)
	n.configs()
	n.deregister(port)
	c := n.agent.counts()
	os.RemoveAll(n.tmp)
	step("done", map[string]any{"list_queries": c.lists, "beats_sent": c.beats})
}

// register: an ephemeral instance with metadata, its beat interval and timeout short.
// (v1.1.6 reads preserved.heart.beat.interval as nanoseconds, the wait it would keep
// after a failed beat; each answered beat sets the wait to the clientBeatInterval the
// server answers, 1000 ms here.)
func (n *nacos1Run) register(port uint64) {
	ok, err := n.naming.RegisterInstance(vo.RegisterInstanceParam{
		Ip:          "127.0.0.1",
		Port:        port,
		Weight:      1,
		Enable:      true,
		Healthy:     true,
		Ephemeral:   true,
		ServiceName: n.service,
		Metadata: map[string]string{
			"version":                    "v1",
			constant.HEART_BEAT_INTERVAL: strconv.Itoa(nacos1BeatInterval),
			constant.HEART_BEAT_TIMEOUT:  strconv.Itoa(nacos1BeatTimeout),
		},
	})
	if err != nil || !ok {
		n.fail("register", "RegisterInstance: %v (ok=%v; the SDK's login answered %q)", err, ok, n.agent.counts().login)
	}
	step("register", map[string]any{"ip": "127.0.0.1", "port": port})
}

// beats: the SDK's beat task keeps the instance healthy past its beat timeout.
func (n *nacos1Run) beats(port uint64) {
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	hold := time.Duration(nacos1BeatTimeout+1500) * time.Millisecond
	start := time.Now()
	for checks := 0; time.Since(start) < hold; checks++ {
		hosts, err := n.http.instances(n.namespace, nacos1Group, n.service)
		n.check("beats", err)
		healthy, found := hosts[addr]
		if !found || !healthy {
			n.fail("beats", "after %s the instance is %v (found %v, healthy %v)", time.Since(start).Round(time.Millisecond), hosts, found, healthy)
		}
		time.Sleep(250 * time.Millisecond)
	}
	c := n.agent.counts()
	// One beat at once, then one an interval (and the time a beat takes) later.
	if want := int(hold/(nacos1BeatInterval*time.Millisecond)) - 1; c.beats < want {
		n.fail("beats", "%d beats sent in %s, want at least %d", c.beats, hold, want)
	}
	step("beats", map[string]any{"beats_sent": c.beats, "held_ms": hold.Milliseconds(), "timeout_ms": nacos1BeatTimeout})
}

// subscribe: the SDK's first list query announces the UDP port it listens on; roster
// must hold it as a UDP subscriber at a loopback address.
func (n *nacos1Run) subscribe(port uint64) *nacos1Heard {
	heard := &nacos1Heard{}
	err := n.naming.Subscribe(&vo.SubscribeParam{
		ServiceName: n.service,
		SubscribeCallback: func(services []model.SubscribeService, err error) {
			heard.add(services)
		},
	})
	n.check("subscribe", err)
	own := fmt.Sprintf("127.0.0.1:%d", port)
	if _, hosts := heard.latest(); hosts[own].Ip == "" {
		n.fail("subscribe", "the callback's first list lacks %s: %v", own, hosts)
	}
	c := n.agent.counts()
	if c.lists == 0 || c.udpPort == "" || c.udpPort == "0" {
		n.fail("subscribe", "the SDK announced no UDP port (list queries %d, udpPort %q)", c.lists, c.udpPort)
	}
	step("subscribe", map[string]any{"clientIP": c.clientIP, "udpPort": c.udpPort})

	body, err := n.http.must("GET", "/nacos/v1/ns/service/subscribers",
		n.params("serviceName", n.service, "groupName", nacos1Group))
	n.check("subscribers", err)
	var subs struct {
		Subscribers []struct {
			IP       string `json:"ip"`
			Port     int    `json:"port"`
			Protocol string `json:"protocol"`
			Agent    string `json:"agent"`
		} `json:"subscribers"`
	}
	n.check("subscribers", json.Unmarshal([]byte(body), &subs))
	found := false
	for _, s := range subs.Subscribers {
		if !loopbackOrEmpty(s.IP) {
			n.fail("subscribers", "a subscriber at %s: %s", s.IP, body)
		}
		if s.Protocol == "udp" && strconv.Itoa(s.Port) == c.udpPort {
			found = true
		}
	}
	if !found {
		n.fail("subscribers", "no UDP subscriber on port %s (the SDK announced clientIP %q): %s", c.udpPort, c.clientIP, body)
	}
	step("subscribers", map[string]any{"count": len(subs.Subscribers), "udpPort": c.udpPort, "ip": "127.0.0.1"})
	return heard
}

// pushes: a registration and a deregistration over plain HTTP reach the callback with no
// list query from the SDK in between, so by UDP push (the SDK polls only when its copy
// is older than the list's cacheMillis, 10 s; the subscription has just refreshed it).
func (n *nacos1Run) pushes(heard *nacos1Heard, port uint64) {
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	form := n.params("serviceName", n.service, "groupName", nacos1Group,
		"ip", "127.0.0.1", "port", strconv.FormatUint(port, 10), "ephemeral", "true")
	for _, change := range []struct {
		name, method string
		present      bool
	}{{"push_register", "POST", true}, {"push_deregister", "DELETE", false}} {
		before := n.agent.counts().lists
		sent := time.Now()
		_, err := n.http.must(change.method, "/nacos/v1/ns/instance", form)
		n.check(change.name, err)
		took, reason := waitFor(5*time.Second, func() string {
			count, hosts := heard.latest()
			if _, ok := hosts[addr]; ok != change.present {
				return fmt.Sprintf("after %d callbacks the latest list is %v", count, hosts)
			}
			return ""
		})
		if reason != "" {
			n.fail(change.name, "the callback did not hear %s %s: %s", change.method, addr, reason)
		}
		if after := n.agent.counts().lists; after != before {
			n.fail(change.name, "the SDK queried the list %d times meanwhile: heard, but not proven pushed", after-before)
		}
		step(change.name, map[string]any{"instance": addr, "via": "udp", "list_queries_between": 0,
			"heard_ms": took.Milliseconds(), "since_request_ms": time.Since(sent).Milliseconds()})
	}
}

// selects: SelectInstances (healthy), SelectOneHealthyInstance and GetService answer
// the SDK's own instance with its metadata.
func (n *nacos1Run) selects(port uint64) {
	instances, err := n.naming.SelectInstances(vo.SelectInstancesParam{ServiceName: n.service, HealthyOnly: true})
	n.check("select_instances", err)
	if len(instances) != 1 || instances[0].Ip != "127.0.0.1" || instances[0].Port != port ||
		instances[0].Metadata["version"] != "v1" || !instances[0].Healthy {
		n.fail("select_instances", "want only 127.0.0.1:%d with version v1, got %+v", port, instances)
	}
	step("select_instances", map[string]any{"count": len(instances), "metadata": instances[0].Metadata})

	one, err := n.naming.SelectOneHealthyInstance(vo.SelectOneHealthInstanceParam{ServiceName: n.service})
	n.check("select_one", err)
	if one.Ip != "127.0.0.1" || one.Port != port {
		n.fail("select_one", "want 127.0.0.1:%d, got %s:%d", port, one.Ip, one.Port)
	}
	step("select_one", map[string]any{"instance": fmt.Sprintf("%s:%d", one.Ip, one.Port)})

	svc, err := n.naming.GetService(vo.GetServiceParam{ServiceName: n.service})
	n.check("get_service", err)
	if want := nacos1Group + "@@" + n.service; svc.Name != want || len(svc.Hosts) != 1 || svc.Hosts[0].Port != port {
		n.fail("get_service", "want %s with 127.0.0.1:%d, got %+v", want, port, svc)
	}
	step("get_service", map[string]any{"name": svc.Name, "hosts": len(svc.Hosts), "cacheMillis": svc.CacheMillis})
}

// configs: publish and get through the SDK, a change published over plain HTTP heard by
// the SDK's long poll, delete.
func (n *nacos1Run) configs() {
	dataID := n.service + ".properties"
	param := vo.ConfigParam{DataId: dataID, Group: nacos1Group}
	published := "greeting=hello"
	param.Content = published
	ok, err := n.config.PublishConfig(param)
	if err != nil || !ok {
		n.fail("config_publish", "PublishConfig: %v (ok=%v)", err, ok)
	}
	step("config_publish", map[string]any{"dataId": dataID})

	got, err := n.config.GetConfig(vo.ConfigParam{DataId: dataID, Group: nacos1Group})
	n.check("config_get", err)
	if got != published {
		n.fail("config_get", "want %q, got %q", published, got)
	}
	step("config_get", map[string]any{"content": got})

	var mu sync.Mutex
	var heard []string
	n.check("config_listen", n.config.ListenConfig(vo.ConfigParam{
		DataId: dataID,
		Group:  nacos1Group,
		OnChange: func(namespace, group, dataId, data string) {
			mu.Lock()
			heard = append(heard, data)
			mu.Unlock()
		},
	}))
	// Publish once a long poll that the server may hold is on its way.
	if _, reason := waitFor(5*time.Second, func() string {
		if n.agent.counts().heldPolls == 0 {
			return "no held long poll sent"
		}
		return ""
	}); reason != "" {
		n.fail("config_listen", "%s", reason)
	}
	time.Sleep(200 * time.Millisecond)
	changed := "greeting=changed"
	form := url.Values{"dataId": {dataID}, "group": {nacos1Group}, "content": {changed}}
	if n.namespace != "" {
		form.Set("tenant", n.namespace)
	}
	_, err = n.http.must("POST", "/nacos/v1/cs/configs", form)
	n.check("config_listen", err)
	took, reason := waitFor(10*time.Second, func() string {
		mu.Lock()
		defer mu.Unlock()
		for _, h := range heard {
			if h == changed {
				return ""
			}
		}
		return fmt.Sprintf("heard %q", heard)
	})
	if reason != "" {
		n.fail("config_listen", "the listener did not hear %q: %s", changed, reason)
	}
	step("config_listen", map[string]any{"content": changed, "heard_ms": took.Milliseconds(), "held_polls": n.agent.counts().heldPolls})

	n.check("config_delete", n.config.CancelListenConfig(vo.ConfigParam{DataId: dataID, Group: nacos1Group}))
	ok, err = n.config.DeleteConfig(vo.ConfigParam{DataId: dataID, Group: nacos1Group})
	if err != nil || !ok {
		n.fail("config_delete", "DeleteConfig: %v (ok=%v)", err, ok)
	}
	get := url.Values{"dataId": {dataID}, "group": {nacos1Group}}
	if n.namespace != "" {
		get.Set("tenant", n.namespace)
	}
	status, body, err := n.http.call("GET", "/nacos/v1/cs/configs", get)
	n.check("config_delete", err)
	if status != 404 {
		n.fail("config_delete", "after DeleteConfig the server answers %d %s", status, body)
	}
	got, err = n.config.GetConfig(vo.ConfigParam{DataId: dataID, Group: nacos1Group})
	if err != nil || got != "" {
		n.fail("config_delete", "GetConfig after the delete: %q, %v", got, err)
	}
	step("config_delete", map[string]any{"dataId": dataID})
}

// deregister: the instance leaves, and no late beat brings it back.
func (n *nacos1Run) deregister(port uint64) {
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ok, err := n.naming.DeregisterInstance(vo.DeregisterInstanceParam{
		Ip: "127.0.0.1", Port: port, ServiceName: n.service, Ephemeral: true,
	})
	if err != nil || !ok {
		n.fail("deregister", "DeregisterInstance: %v (ok=%v)", err, ok)
	}
	absent := func() string {
		hosts, err := n.http.instances(n.namespace, nacos1Group, n.service)
		if err != nil {
			return err.Error()
		}
		if _, ok := hosts[addr]; ok {
			return fmt.Sprintf("still listed: %v", hosts)
		}
		return ""
	}
	if _, reason := waitFor(3*time.Second, absent); reason != "" {
		n.fail("deregister", "%s", reason)
	}
	// Two beat intervals: a beat still on its way would register the instance again.
	beats := n.agent.counts().beats
	hold := 2*nacos1BeatInterval*time.Millisecond + 500*time.Millisecond
	for start := time.Now(); time.Since(start) < hold; time.Sleep(250 * time.Millisecond) {
		if reason := absent(); reason != "" {
			n.fail("deregister", "back after the deregistration: %s", reason)
		}
	}
	if after := n.agent.counts().beats; after != beats {
		n.fail("deregister", "%d beats sent after the deregistration", after-beats)
	}
	step("deregister", map[string]any{"instance": addr, "absent_ms": hold.Milliseconds()})
}
