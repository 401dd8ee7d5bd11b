package main

// dubbo-go v3 with application-level service discovery, Nacos (roster) as registry,
// metadata report and config centre, Triple between consumer and providers:
//
//	dubbo-provider --server H:P[,H:P...] --username U --password P --app APP --name p1 --port N
//	dubbo-consumer --server H:P[,H:P...] --username U --password P --app APP [--interval 50ms] [--seconds 120]
//
// A provider prints {"step":"serving",...} once roster lists its instance, then serves
// until killed, until its stdin (a pipe) closes, or for --seconds. A consumer calls Greet
// every interval and prints, once a second, {"step":"calls","by":{"p1":10,...},
// "errors":0,"at_ms":...} (calls answered per provider, failed calls, and the end of that
// second in Unix ms); it ends with {"step":"done"} when its stdin closes or after --seconds.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"dubbo.apache.org/dubbo-go/v3"
	"dubbo.apache.org/dubbo-go/v3/client"
	"dubbo.apache.org/dubbo-go/v3/common/constant"
	"dubbo.apache.org/dubbo-go/v3/config"
	"dubbo.apache.org/dubbo-go/v3/config_center"
	_ "dubbo.apache.org/dubbo-go/v3/imports"
	"dubbo.apache.org/dubbo-go/v3/logger"
	"dubbo.apache.org/dubbo-go/v3/metadata"
	"dubbo.apache.org/dubbo-go/v3/protocol"
	"dubbo.apache.org/dubbo-go/v3/registry"
	"dubbo.apache.org/dubbo-go/v3/server"
)

func init() {
	scenarios["dubbo-provider"] = runDubboProvider
	scenarios["dubbo-consumer"] = runDubboConsumer
}

// dubboOptions are the flags both roles share.
type dubboOptions struct {
	servers   string
	username  string
	password  string
	app       string
	namespace string
	dir       string
	ownDir    bool // dir is a temp dir of ours, removed at a normal end
	seconds   int
}

func dubboFlags(fs *flag.FlagSet) *dubboOptions {
	o := &dubboOptions{}
	fs.StringVar(&o.servers, "server", "127.0.0.1:8848", "roster HTTP addresses, comma-separated (gRPC is on port + 1000)")
	fs.StringVar(&o.username, "username", "nacos", "user")
	fs.StringVar(&o.password, "password", "", "password")
	fs.StringVar(&o.app, "app", "", "application name")
	fs.StringVar(&o.namespace, "namespace", "", "namespace id (empty: public)")
	fs.StringVar(&o.dir, "dir", "", "directory for the Nacos client's cache and log (default: a new temp dir)")
	fs.IntVar(&o.seconds, "seconds", 300, "end the run after this many seconds")
	return o
}

// setup keeps the libraries off our step lines and files out of the working tree,
// and makes dubbo-go register a loopback address.
func (o *dubboOptions) setup() {
	if o.app == "" || o.password == "" {
		fail("flags", "--app and --password are required")
	}
	// dubbo-go's logger writes to fd 1 (captured when its package loads); our step lines
	// move to a copy of fd 1, and fd 1 becomes stderr.
	fd, err := syscall.Dup(1)
	check("stdout", err)
	check("stdout", syscall.Dup3(2, 1, 0))
	os.Stdout = os.NewFile(uintptr(fd), "/dev/stdout")
	if o.dir == "" {
		o.dir, err = os.MkdirTemp("", "roster-dubbo-")
		check("dir", err)
		o.ownDir = true
	}
	// The address dubbo-go registers for this process: loopback, never a guess at a NIC.
	check("env", os.Setenv(constant.DubboIpToRegistryKey, "127.0.0.1"))
}

// nacosParams point the Nacos client's cache and log into o.dir.
func (o *dubboOptions) nacosParams() map[string]string {
	return map[string]string{
		constant.NacosCacheDirKey:       filepath.Join(o.dir, "cache"),
		constant.NacosLogDirKey:         filepath.Join(o.dir, "log"),
		constant.NacosLogLevelKey:       "warn",
		constant.NacosNotLoadLocalCache: "true",
	}
}

// instance is dubbo-go's root: roster as registry (application-level), metadata report and
// config centre.
func (o *dubboOptions) instance(extra ...dubbo.InstanceOption) *dubbo.Instance {
	opts := []dubbo.InstanceOption{
		dubbo.WithName(o.app),
		dubbo.WithLogger(logger.WithZap(), logger.WithLevel("warn")),
		dubbo.WithRegistry(
			registry.WithNacos(),
			registry.WithAddress(o.servers),
			registry.WithUsername(o.username),
			registry.WithPassword(o.password),
			registry.WithNamespace(o.namespace),
			registry.WithParams(o.nacosParams()),
			// registry-type: service — application-level discovery only.
			func(opts *registry.Options) { opts.Registry.RegistryType = constant.RegistryTypeService },
			registry.WithoutUseAsMetaReport(),
			registry.WithoutUseAsConfigCenter(),
		),
		dubbo.WithMetadataReport(
			metadata.WithNacos(),
			metadata.WithAddress(o.servers),
			metadata.WithUsername(o.username),
			metadata.WithPassword(o.password),
			metadata.WithNamespace(o.namespace),
			metadata.WithParams(o.nacosParams()),
		),
		dubbo.WithConfigCenter(
			config_center.WithNacos(),
			config_center.WithAddress(o.servers),
			config_center.WithUsername(o.username),
			config_center.WithPassword(o.password),
			config_center.WithNamespace(o.namespace),
			config_center.WithDataID(o.app),
			config_center.WithGroup("dubbo"),
			config_center.WithParams(o.nacosParams()),
		),
	}
	var ins *dubbo.Instance
	var err error
	quietly(func() { ins, err = dubbo.NewInstance(append(opts, extra...)...) })
	check("instance", err)
	return ins
}

// quietly runs f with os.Stdout pointing at stderr: dubbo-go's logger takes os.Stdout when
// it is built (in NewInstance), and our step lines must stay alone on stdout.
func quietly(f func()) {
	stdout := os.Stdout
	os.Stdout = os.Stderr
	defer func() { os.Stdout = stdout }()
	f()
}

// dubboInstance is one host of roster's v1 instance list.
type dubboInstance struct {
	IP       string            `json:"ip"`
	Port     int               `json:"port"`
	Healthy  bool              `json:"healthy"`
	Metadata map[string]string `json:"metadata"`
}

func dubboInstances(r *rosterHTTP, namespace, service string) ([]dubboInstance, error) {
	params := url.Values{"serviceName": {service}, "groupName": {"DEFAULT_GROUP"}}
	if namespace != "" {
		params.Set("namespaceId", namespace)
	}
	body, err := r.must("GET", "/nacos/v1/ns/instance/list", params)
	if err != nil {
		return nil, err
	}
	var v struct {
		Hosts []dubboInstance `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		return nil, fmt.Errorf("instance list: %v in %s", err, body)
	}
	return v.Hosts, nil
}

func runDubboProvider(args []string) {
	fs := flag.NewFlagSet("dubbo-provider", flag.ExitOnError)
	o := dubboFlags(fs)
	name := fs.String("name", "", "this provider's name, in every reply")
	port := fs.Int("port", 0, "Triple port on 127.0.0.1")
	_ = fs.Parse(args)
	if *name == "" || *port == 0 {
		fail("flags", "--name and --port are required")
	}
	o.setup()
	end := time.Now().Add(time.Duration(o.seconds) * time.Second)
	watchdog(time.Duration(o.seconds)*time.Second + 30*time.Second)

	ins := o.instance(
		dubbo.WithRemoteMetadata(),
		dubbo.WithProtocol(protocol.WithTriple(), protocol.WithIp("127.0.0.1"), protocol.WithPort(*port)),
	)
	// The config centre's item (data id = app, group dubbo) may set dubbo.custom.config-map.greeting.
	greeting := fmt.Sprint(config.GetRootConfig().Custom.GetDefineValue("greeting", "hello"))
	srv, err := ins.NewServer(server.WithServerSerialization(constant.Hessian2Serialization))
	check("server", err)
	check("register", srv.Register(&GreeterProvider{name: *name, greeting: greeting}, &greeterServiceInfo))
	go func() {
		err := srv.Serve()
		fail("serve", "Serve returned: %v", err)
	}()

	// Serving once roster lists this process under the application's name.
	r := newRosterHTTP(strings.Split(o.servers, ",")[0], o.username, o.password)
	self := fmt.Sprintf("127.0.0.1:%d", *port)
	var revision string
	took, reason := waitFor(60*time.Second, func() string {
		hosts, err := dubboInstances(r, o.namespace, o.app)
		if err != nil {
			return err.Error()
		}
		for _, h := range hosts {
			if fmt.Sprintf("%s:%d", h.IP, h.Port) == self {
				revision = h.Metadata["dubbo.metadata.revision"]
				return ""
			}
		}
		return fmt.Sprintf("%s not among %v", self, hosts)
	})
	if reason != "" {
		fail("serving", "not registered after %s: %s", took, reason)
	}
	step("serving", map[string]any{"name": *name, "app": o.app, "addr": self,
		"revision": revision, "greeting": greeting, "took_ms": took.Milliseconds()})
	closed := stdinClosed()
	for !closed() && time.Now().Before(end) {
		time.Sleep(100 * time.Millisecond)
	}
	o.exit()
}

// stdinClosed answers a func that tells whether stdin, when it is a pipe, has reached its
// end: the tests close it to end a run. Without a pipe the run ends at --seconds only.
func stdinClosed() func() bool {
	var done atomic.Bool
	if fi, err := os.Stdin.Stat(); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			done.Store(true)
		}()
	}
	return done.Load
}

func runDubboConsumer(args []string) {
	fs := flag.NewFlagSet("dubbo-consumer", flag.ExitOnError)
	o := dubboFlags(fs)
	interval := fs.Duration("interval", 50*time.Millisecond, "time between calls")
	_ = fs.Parse(args)
	o.setup()
	watchdog(time.Duration(o.seconds)*time.Second + 30*time.Second)

	ins := o.instance()
	cli, err := ins.NewClient(
		client.WithClientSerialization(constant.Hessian2Serialization),
		client.WithClientProtocolTriple(),
		// One attempt per call: a call that goes to a provider that is gone is an error,
		// not a retry that hides it.
		client.WithClientClusterFailFast(),
		client.WithClientLoadBalanceRoundRobin(),
		client.WithClientRequestTimeout(2*time.Second),
	)
	check("client", err)
	conn, err := cli.DialWithInfo(dubboGreeterInterface, &greeterClientInfo)
	check("dial", err)
	step("dialed", map[string]any{"interface": dubboGreeterInterface})

	var mu sync.Mutex
	by := map[string]int{}
	errors := 0
	lastErr := ""
	go func() {
		for range time.Tick(time.Second) {
			mu.Lock()
			line := map[string]any{"by": by, "errors": errors, "at_ms": time.Now().UnixMilli()}
			if lastErr != "" {
				line["last_error"] = lastErr
			}
			by, errors, lastErr = map[string]int{}, 0, ""
			mu.Unlock()
			step("calls", line)
		}
	}()

	closed := stdinClosed()
	end := time.Now().Add(time.Duration(o.seconds) * time.Second)
	for time.Now().Before(end) && !closed() {
		reply := new(GreetReply)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := conn.CallUnary(ctx, []interface{}{&GreetRequest{Caller: o.app}}, reply, "Greet")
		cancel()
		mu.Lock()
		if err != nil {
			errors++
			lastErr = err.Error()
		} else {
			by[reply.Provider]++
		}
		mu.Unlock()
		time.Sleep(*interval)
	}
	step("done", nil)
	o.exit()
}

// exit ends a run that passed, removing the temp dir it made.
func (o *dubboOptions) exit() {
	if o.ownDir {
		_ = os.RemoveAll(o.dir)
	}
	os.Exit(0)
}
