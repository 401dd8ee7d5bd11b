package main

// The nacos-sdk-go v2 scenarios (gRPC, auth on): nacos2-flow runs naming and config on one
// node from start to end; nacos2-stay registers, subscribes and listens, then reports what
// it is pushed until its stdin closes, while the test kills the node it is connected to.

import (
	"bufio"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/config_client"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

func init() {
	scenarios["nacos2-flow"] = runNacos2Flow
	scenarios["nacos2-stay"] = runNacos2Stay
}

// nacos2Param is a client of the servers given as "host:port,host:port" (HTTP ports; the
// SDK adds 1000 for gRPC), its caches and logs in a temporary directory.
func nacos2Param(servers, namespace, username, password, tmp string) (vo.NacosClientParam, error) {
	var configs []constant.ServerConfig
	for _, s := range strings.Split(servers, ",") {
		host, port, err := net.SplitHostPort(strings.TrimSpace(s))
		if err != nil {
			return vo.NacosClientParam{}, fmt.Errorf("server %q: %v", s, err)
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return vo.NacosClientParam{}, fmt.Errorf("server %q: %v", s, err)
		}
		configs = append(configs, *constant.NewServerConfig(host, p))
	}
	client := constant.NewClientConfig(
		constant.WithNamespaceId(namespace),
		constant.WithUsername(username),
		constant.WithPassword(password),
		constant.WithTimeoutMs(5000),
		constant.WithNotLoadCacheAtStart(true),
		constant.WithCacheDir(tmp+"/cache"),
		constant.WithLogDir(tmp+"/log"),
		constant.WithLogLevel("warn"),
	)
	return vo.NacosClientParam{ClientConfig: client, ServerConfigs: configs}, nil
}

type nacos2Flags struct {
	servers, username, password, namespace, service, dataID string
}

func (f *nacos2Flags) parse(name string, args []string) {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	fs.StringVar(&f.servers, "server", "", "HTTP addresses of the nodes, comma-separated")
	fs.StringVar(&f.username, "username", "nacos", "user")
	fs.StringVar(&f.password, "password", "", "password")
	fs.StringVar(&f.namespace, "namespace", "", "namespace id (empty: public)")
	fs.StringVar(&f.service, "service", "go2-orders", "service name")
	fs.StringVar(&f.dataID, "data-id", "go2-app.yaml", "config data id")
	_ = fs.Parse(args)
	if f.servers == "" || f.password == "" {
		fail("args", "--server and --password are required")
	}
}

func (f *nacos2Flags) clients() (naming_client.INamingClient, config_client.IConfigClient) {
	tmp, err := os.MkdirTemp("", "roster-go-nacos2-")
	check("connect", err)
	param, err := nacos2Param(f.servers, f.namespace, f.username, f.password, tmp)
	check("connect", err)
	naming, err := clients.NewNamingClient(param)
	check("connect", err)
	config, err := clients.NewConfigClient(param)
	check("connect", err)
	return naming, config
}

func hostKey(i model.Instance) string { return fmt.Sprintf("%s:%d", i.Ip, i.Port) }

// hostsOf describes a list as sorted "ip:port" (with "!" after an unhealthy one).
func hostsOf(list []model.Instance) []string {
	var out []string
	for _, i := range list {
		k := hostKey(i)
		if !i.Healthy {
			k += "!"
		}
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// lists records what a subscription callback was handed, in order.
type lists struct {
	mu   sync.Mutex
	seen [][]model.Instance
}

func (l *lists) callback(services []model.Instance, err error) {
	if err != nil {
		return
	}
	l.mu.Lock()
	l.seen = append(l.seen, append([]model.Instance(nil), services...))
	l.mu.Unlock()
}

func (l *lists) last() []model.Instance {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.seen) == 0 {
		return nil
	}
	return l.seen[len(l.seen)-1]
}

func find(list []model.Instance, key string) *model.Instance {
	for i := range list {
		if hostKey(list[i]) == key {
			return &list[i]
		}
	}
	return nil
}

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func runNacos2Flow(args []string) {
	var f nacos2Flags
	f.parse("nacos2-flow", args)
	watchdog(150 * time.Second)
	group := constant.DEFAULT_GROUP
	http := newRosterHTTP(strings.Split(f.servers, ",")[0], f.username, f.password)
	naming, config := f.clients()
	step("connect", map[string]any{"server_healthy": naming.ServerHealthy()})

	// Naming: an ephemeral instance with metadata, read back every way the SDK reads.
	own := vo.RegisterInstanceParam{
		Ip: "127.50.0.1", Port: 8080, Weight: 2, Enable: true, Healthy: true, Ephemeral: true,
		ServiceName: f.service, GroupName: group, ClusterName: "DEFAULT",
		Metadata: map[string]string{"version": "v1.2", "zone": "a"},
	}
	ok, err := naming.RegisterInstance(own)
	check("register", err)
	if !ok {
		fail("register", "RegisterInstance answered false")
	}
	step("register", nil)
	took, why := waitFor(5*time.Second, func() string {
		list, err := naming.SelectInstances(vo.SelectInstancesParam{ServiceName: f.service, GroupName: group, HealthyOnly: true})
		if err != nil {
			return err.Error()
		}
		i := find(list, "127.50.0.1:8080")
		if i == nil {
			return fmt.Sprintf("not listed: %v", hostsOf(list))
		}
		if i.Metadata["version"] != "v1.2" || i.Metadata["zone"] != "a" || i.Weight != 2 || !i.Enable {
			return fmt.Sprintf("listed as %+v", *i)
		}
		return ""
	})
	if why != "" {
		fail("select_instances", "%s", why)
	}
	step("select_instances", map[string]any{"ms": took.Milliseconds()})
	one, err := naming.SelectOneHealthyInstance(vo.SelectOneHealthInstanceParam{ServiceName: f.service, GroupName: group})
	check("select_one", err)
	if hostKey(*one) != "127.50.0.1:8080" {
		fail("select_one", "picked %s", hostKey(*one))
	}
	step("select_one", nil)
	svc, err := naming.GetService(vo.GetServiceParam{ServiceName: f.service, GroupName: group})
	check("get_service", err)
	if find(svc.Hosts, "127.50.0.1:8080") == nil {
		fail("get_service", "hosts %v", hostsOf(svc.Hosts))
	}
	step("get_service", map[string]any{"name": svc.Name, "hosts": hostsOf(svc.Hosts)})

	// Subscribe, then change the service over HTTP v1: a registration, a silent
	// instance's unhealthy turn, a deregistration.
	var got lists
	check("subscribe", naming.Subscribe(&vo.SubscribeParam{ServiceName: f.service, GroupName: group, SubscribeCallback: got.callback}))
	// The SDK calls back when a pushed list differs from its cache, which the reads above
	// filled: the first callback is the next change.
	step("subscribe", nil)
	const beatTimeout = 3 * time.Second
	_, err = http.must("POST", "/nacos/v1/ns/instance", url.Values{
		"serviceName": {f.service}, "groupName": {group}, "ip": {"127.50.0.2"}, "port": {"8081"},
		"ephemeral": {"true"},
		"metadata":  {fmt.Sprintf(`{"preserved.heart.beat.timeout":"%d","preserved.ip.delete.timeout":"60000"}`, beatTimeout.Milliseconds())},
	})
	check("push_registered", err)
	registered := time.Now()
	took, why = waitFor(5*time.Second, func() string {
		if i := find(got.last(), "127.50.0.2:8081"); i == nil || !i.Healthy || find(got.last(), "127.50.0.1:8080") == nil {
			return fmt.Sprintf("pushed %v", hostsOf(got.last()))
		}
		return ""
	})
	if why != "" {
		fail("push_registered", "%s", why)
	}
	step("push_registered", map[string]any{"ms": took.Milliseconds()})
	// The HTTP instance sends no beats: it turns unhealthy after its beat timeout, and the
	// subscriber is told within a second more.
	_, why = waitFor(beatTimeout+3*time.Second, func() string {
		if i := find(got.last(), "127.50.0.2:8081"); i == nil || i.Healthy {
			return fmt.Sprintf("pushed %v", hostsOf(got.last()))
		}
		return ""
	})
	since := time.Since(registered)
	if why != "" {
		fail("push_unhealthy", "%s after %s", why, since)
	}
	if since > beatTimeout+time.Second {
		fail("push_unhealthy", "heard %s after the registration, more than the beat timeout %s + 1 s", since, beatTimeout)
	}
	step("push_unhealthy", map[string]any{"ms_after_registration": since.Milliseconds()})
	_, err = http.must("DELETE", "/nacos/v1/ns/instance", url.Values{
		"serviceName": {f.service}, "groupName": {group}, "ip": {"127.50.0.2"}, "port": {"8081"}, "ephemeral": {"true"},
	})
	check("push_deregistered", err)
	took, why = waitFor(5*time.Second, func() string {
		if find(got.last(), "127.50.0.2:8081") != nil || find(got.last(), "127.50.0.1:8080") == nil {
			return fmt.Sprintf("pushed %v", hostsOf(got.last()))
		}
		return ""
	})
	if why != "" {
		fail("push_deregistered", "%s", why)
	}
	step("push_deregistered", map[string]any{"ms": took.Milliseconds()})

	// A batch: both instances in one request, read back over HTTP v1.
	batch := f.service + "-batch"
	ok, err = naming.BatchRegisterInstance(vo.BatchRegisterInstanceParam{ServiceName: batch, GroupName: group, Instances: []vo.RegisterInstanceParam{
		{Ip: "127.50.1.1", Port: 9090, Weight: 1, Enable: true, Healthy: true, Ephemeral: true, Metadata: map[string]string{"i": "1"}},
		{Ip: "127.50.1.2", Port: 9090, Weight: 1, Enable: true, Healthy: true, Ephemeral: true, Metadata: map[string]string{"i": "2"}},
	}})
	check("batch_register", err)
	if !ok {
		fail("batch_register", "BatchRegisterInstance answered false")
	}
	if _, why := waitFor(5*time.Second, func() string {
		hosts, err := http.instances(f.namespace, group, batch)
		if err != nil {
			return err.Error()
		}
		if len(hosts) != 2 || !hosts["127.50.1.1:9090"] || !hosts["127.50.1.2:9090"] {
			return fmt.Sprintf("listed over HTTP: %v", hosts)
		}
		return ""
	}); why != "" {
		fail("batch_register", "%s", why)
	}
	step("batch_register", nil)

	ok, err = naming.DeregisterInstance(vo.DeregisterInstanceParam{Ip: "127.50.0.1", Port: 8080, ServiceName: f.service, GroupName: group, Cluster: "DEFAULT", Ephemeral: true})
	check("deregister", err)
	if !ok {
		fail("deregister", "DeregisterInstance answered false")
	}
	if _, why := waitFor(5*time.Second, func() string {
		hosts, err := http.instances(f.namespace, group, f.service)
		if err != nil {
			return err.Error()
		}
		if len(hosts) != 0 {
			return fmt.Sprintf("still listed over HTTP: %v", hosts)
		}
		return ""
	}); why != "" {
		fail("deregister", "%s", why)
	}
	step("deregister", nil)

	// Config: publish, get, listen to changes made over HTTP v1 and by another Go client,
	// compare-and-set, search, delete.
	item := vo.ConfigParam{DataId: f.dataID, Group: group}
	publish := func(name, content, casMd5 string) (bool, error) {
		p := item
		p.Content, p.CasMd5 = content, casMd5
		return config.PublishConfig(p)
	}
	ok, err = publish("publish", "port: 1", "")
	check("publish", err)
	if !ok {
		fail("publish", "PublishConfig answered false")
	}
	step("publish", nil)
	content, err := config.GetConfig(item)
	check("get", err)
	if content != "port: 1" {
		fail("get", "read %q", content)
	}
	step("get", nil)
	var heardMu sync.Mutex
	var heard []string
	listen := item
	listen.OnChange = func(_, _, _, data string) {
		heardMu.Lock()
		heard = append(heard, data)
		heardMu.Unlock()
	}
	check("listen", config.ListenConfig(listen))
	// ListenConfig returns before the SDK's listen request is sent (its listen loop sends
	// it): a change made before the node holds the listener is found by the SDK's 5 s
	// check, not pushed. Wait until the node lists the listener, as an operator would
	// see it.
	took, why = waitFor(10*time.Second, func() string {
		body, err := http.must("GET", "/nacos/v1/cs/configs/listener", url.Values{"dataId": {f.dataID}, "group": {group}})
		if err != nil {
			return err.Error()
		}
		if !strings.Contains(body, `"protocol":"grpc"`) {
			return "not listed as listening: " + body
		}
		return ""
	})
	if why != "" {
		fail("listen", "%s", why)
	}
	step("listen", map[string]any{"ms": took.Milliseconds()})
	waitHeard := func(name, want string) {
		took, why := waitFor(10*time.Second, func() string {
			heardMu.Lock()
			defer heardMu.Unlock()
			if len(heard) == 0 || heard[len(heard)-1] != want {
				return fmt.Sprintf("heard %q", heard)
			}
			return ""
		})
		if why != "" {
			fail(name, "%s", why)
		}
		step(name, map[string]any{"ms": took.Milliseconds()})
	}
	_, err = http.must("POST", "/nacos/v1/cs/configs", url.Values{"dataId": {f.dataID}, "group": {group}, "content": {"port: 2"}})
	check("listen_http_change", err)
	waitHeard("listen_http_change", "port: 2")
	other, err := nacos2Param(f.servers, f.namespace, f.username, f.password, os.TempDir()+"/roster-go-nacos2-other")
	check("listen_go_change", err)
	otherConfig, err := clients.NewConfigClient(other)
	check("listen_go_change", err)
	p := item
	p.Content = "port: 3"
	ok, err = otherConfig.PublishConfig(p)
	check("listen_go_change", err)
	if !ok {
		fail("listen_go_change", "the other client's PublishConfig answered false")
	}
	waitHeard("listen_go_change", "port: 3")
	otherConfig.CloseClient()

	ok, err = publish("cas", "port: 4", md5hex("port: 2"))
	if err == nil && ok {
		fail("cas_stale", "a publish with a stale md5 was accepted")
	}
	if content, _ := config.GetConfig(item); content != "port: 3" {
		fail("cas_stale", "the refused publish changed the item to %q", content)
	}
	step("cas_stale", map[string]any{"refused": fmt.Sprint(err)})
	ok, err = publish("cas", "port: 4", md5hex("port: 3"))
	check("cas_current", err)
	if !ok {
		fail("cas_current", "a publish with the current md5 answered false")
	}
	waitHeard("cas_current", "port: 4")

	page, err := config.SearchConfig(vo.SearchConfigParam{Search: "blur", DataId: f.dataID[:4] + "*", Group: group, PageNo: 1, PageSize: 10})
	check("search", err)
	found := false
	for _, c := range page.PageItems {
		found = found || (c.DataId == f.dataID && c.Content == "port: 4")
	}
	if !found {
		fail("search", "%s not among %+v", f.dataID, page.PageItems)
	}
	step("search", map[string]any{"total": page.TotalCount})

	ok, err = config.DeleteConfig(item)
	check("delete", err)
	if !ok {
		fail("delete", "DeleteConfig answered false")
	}
	if _, why := waitFor(5*time.Second, func() string {
		status, body, err := http.call("GET", "/nacos/v1/cs/configs", url.Values{"dataId": {f.dataID}, "group": {group}})
		if err != nil {
			return err.Error()
		}
		if status != 404 {
			return fmt.Sprintf("HTTP read answers %d %q", status, body)
		}
		return ""
	}); why != "" {
		fail("delete", "%s", why)
	}
	step("delete", nil)

	naming.CloseClient()
	config.CloseClient()
	step("done", nil)
}

// runNacos2Stay registers --ips instances of --service, subscribes to it and listens to
// --data-id, prints each list it is pushed ("pushed") and each config change ("config"),
// and answers a "check N" line on stdin with "healthy" (n: N): whether the SDK deems its
// server healthy and the instances it reads. It deregisters and ends when stdin
// closes.
func runNacos2Stay(args []string) {
	var f nacos2Flags
	fs := []string{}
	ips := 1
	for i := 0; i < len(args); i++ {
		if args[i] == "--ips" && i+1 < len(args) {
			ips, _ = strconv.Atoi(args[i+1])
			i++
			continue
		}
		fs = append(fs, args[i])
	}
	f.parse("nacos2-stay", fs)
	watchdog(300 * time.Second)
	group := constant.DEFAULT_GROUP
	naming, config := f.clients()
	var mine []vo.RegisterInstanceParam
	for i := 1; i <= ips; i++ {
		mine = append(mine, vo.RegisterInstanceParam{
			Ip: fmt.Sprintf("127.52.0.%d", i), Port: 8080, Weight: 1, Enable: true, Healthy: true, Ephemeral: true,
			ServiceName: f.service, GroupName: group, Metadata: map[string]string{"client": "go2"},
		})
	}
	var err error
	if ips == 1 {
		_, err = naming.RegisterInstance(mine[0])
	} else {
		_, err = naming.BatchRegisterInstance(vo.BatchRegisterInstanceParam{ServiceName: f.service, GroupName: group, Instances: mine})
	}
	check("register", err)
	check("subscribe", naming.Subscribe(&vo.SubscribeParam{ServiceName: f.service, GroupName: group,
		SubscribeCallback: func(list []model.Instance, err error) {
			if err == nil {
				step("pushed", map[string]any{"hosts": hostsOf(list), "at_ms": time.Now().UnixMilli()})
			}
		}}))
	check("listen", config.ListenConfig(vo.ConfigParam{DataId: f.dataID, Group: group,
		OnChange: func(_, _, _, data string) {
			step("config", map[string]any{"content": data, "at_ms": time.Now().UnixMilli()})
		}}))
	step("ready", map[string]any{"instances": ips})
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if n, ok := strings.CutPrefix(in.Text(), "check "); ok {
			list, err := naming.SelectAllInstances(vo.SelectAllInstancesParam{ServiceName: f.service, GroupName: group})
			if err == nil && len(list) == 0 {
				err = errors.New("an empty list")
			}
			step("healthy", map[string]any{"n": n, "server_healthy": naming.ServerHealthy(), "hosts": hostsOf(list), "error": fmt.Sprint(err)})
		}
	}
	for _, m := range mine {
		_, _ = naming.DeregisterInstance(vo.DeregisterInstanceParam{Ip: m.Ip, Port: m.Port, ServiceName: f.service, GroupName: group, Ephemeral: true})
	}
	naming.CloseClient()
	config.CloseClient()
	step("done", nil)
}
