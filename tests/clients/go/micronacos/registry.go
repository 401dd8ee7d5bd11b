// Package micronacos is a go-micro v4 registry.Registry over nacos-sdk-go v2 (gRPC), the
// shape of the published plugin (github.com/go-micro/plugins/v4/registry/nacos): one
// Nacos instance per go-micro node, the service's version in the instance metadata under
// "version", GetService answering the healthy, enabled instances with weight, and Watch
// over Nacos subscriptions.
//
// It lives here because the published plugin is not served by the Go module proxy, so
// the test module cannot depend on it. Where the plugin is wrong in ways that would make
// go-micro's registry cache keep a removed node until its TTL (a minute), this one follows
// go-micro's contract instead, and says so below:
//   - the plugin's watch results carry Version "latest" (go-micro's cache finds the
//     service to update or delete by version, so a delete never matches) and the grouped
//     Nacos name ("DEFAULT_GROUP@@name", which the cache does not watch); here they carry
//     the instance's version and the plain name;
//   - the plugin emits one change per push and drops the rest; here a push is compared
//     with the last one and every created, updated and deleted node is emitted;
//   - the plugin ignores registry.WatchService and subscribes to every service that
//     exists when the watch starts; here a watch of one service subscribes to that one.
package micronacos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"go-micro.dev/v4/registry"
)

type configKey struct{}

// WithClientConfig sets the nacos-sdk-go client configuration (namespace, username and
// password, log and cache directories), as the plugin's option of the same name.
func WithClientConfig(cc constant.ClientConfig) registry.Option {
	return func(o *registry.Options) {
		if o.Context == nil {
			o.Context = context.Background()
		}
		o.Context = context.WithValue(o.Context, configKey{}, cc)
	}
}

type nacosRegistry struct {
	mu       sync.RWMutex
	opts     registry.Options
	client   naming_client.INamingClient
	watching map[string]int // service → watchers subscribed to it
}

// NewRegistry connects to the servers in registry.Addrs ("host:port" of the HTTP port;
// the SDK reaches gRPC on port + 1000).
func NewRegistry(opts ...registry.Option) (registry.Registry, error) {
	n := &nacosRegistry{opts: registry.Options{Context: context.Background()}, watching: map[string]int{}}
	if err := n.Init(opts...); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *nacosRegistry) Init(opts ...registry.Option) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, o := range opts {
		o(&n.opts)
	}
	cc, _ := n.opts.Context.Value(configKey{}).(constant.ClientConfig)
	addrs := n.opts.Addrs
	if len(addrs) == 0 {
		addrs = []string{"127.0.0.1:8848"}
	}
	var servers []constant.ServerConfig
	for _, addr := range addrs {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return err
		}
		p, err := strconv.ParseUint(port, 10, 64)
		if err != nil {
			return err
		}
		servers = append(servers, constant.ServerConfig{IpAddr: host, Port: p, ContextPath: "/nacos"})
	}
	if n.opts.Timeout == 0 {
		n.opts.Timeout = time.Second
	}
	cc.TimeoutMs = uint64(n.opts.Timeout.Milliseconds())
	client, err := clients.NewNamingClient(vo.NacosClientParam{ClientConfig: &cc, ServerConfigs: servers})
	if err != nil {
		return err
	}
	if n.client != nil {
		n.client.CloseClient()
	}
	n.client = client
	return nil
}

func (n *nacosRegistry) naming() naming_client.INamingClient {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.client
}

func (n *nacosRegistry) Options() registry.Options {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.opts
}

func nodeAddress(s *registry.Service) (string, uint64, error) {
	if len(s.Nodes) == 0 {
		return "", 0, errors.New("the service has no node")
	}
	host, port, err := net.SplitHostPort(s.Nodes[0].Address)
	if err != nil {
		return "", 0, err
	}
	p, err := strconv.ParseUint(port, 10, 64)
	return host, p, err
}

// Register registers the service's first node as an ephemeral instance, its metadata
// with "version" set to the service's version (as the plugin does).
func (n *nacosRegistry) Register(s *registry.Service, _ ...registry.RegisterOption) error {
	host, port, err := nodeAddress(s)
	if err != nil {
		return err
	}
	metadata := map[string]string{}
	for k, v := range s.Nodes[0].Metadata {
		metadata[k] = v
	}
	metadata["version"] = s.Version
	_, err = n.naming().RegisterInstance(vo.RegisterInstanceParam{
		Ip:          host,
		Port:        port,
		ServiceName: s.Name,
		Metadata:    metadata,
		Weight:      1,
		Enable:      true,
		Healthy:     true,
		Ephemeral:   true,
	})
	return err
}

func (n *nacosRegistry) Deregister(s *registry.Service, _ ...registry.DeregisterOption) error {
	host, port, err := nodeAddress(s)
	if err != nil {
		return err
	}
	_, err = n.naming().DeregisterInstance(vo.DeregisterInstanceParam{
		Ip: host, Port: port, ServiceName: s.Name, Ephemeral: true,
	})
	return err
}

// usable is the plugin's filter: healthy, enabled, with weight.
func usable(i model.Instance) bool { return i.Healthy && i.Enable && i.Weight > 0 }

func instanceID(i model.Instance) string {
	if i.InstanceId != "" {
		return i.InstanceId
	}
	return fmt.Sprintf("%s#%d", i.Ip, i.Port)
}

// asService is one go-micro service per instance, as the plugin answers.
func asService(name string, i model.Instance) *registry.Service {
	return &registry.Service{
		Name:     name,
		Version:  i.Metadata["version"],
		Metadata: i.Metadata,
		Nodes: []*registry.Node{{
			Id:       instanceID(i),
			Address:  net.JoinHostPort(i.Ip, strconv.FormatUint(i.Port, 10)),
			Metadata: i.Metadata,
		}},
	}
}

// GetService answers the usable instances, read (as every nacos-sdk-go v2 read) from the
// SDK's subscription cache, which the server's pushes keep current.
func (n *nacosRegistry) GetService(name string, _ ...registry.GetOption) ([]*registry.Service, error) {
	service, err := n.naming().GetService(vo.GetServiceParam{ServiceName: name})
	if err != nil {
		return nil, err
	}
	var services []*registry.Service
	for _, i := range service.Hosts {
		if usable(i) {
			services = append(services, asService(name, i))
		}
	}
	if len(services) == 0 {
		return nil, registry.ErrNotFound
	}
	return services, nil
}

func (n *nacosRegistry) ListServices(_ ...registry.ListOption) ([]*registry.Service, error) {
	names, err := n.serviceNames()
	if err != nil {
		return nil, err
	}
	services := make([]*registry.Service, 0, len(names))
	for _, name := range names {
		services = append(services, &registry.Service{Name: name})
	}
	return services, nil
}

func (n *nacosRegistry) serviceNames() ([]string, error) {
	first, err := n.naming().GetAllServicesInfo(vo.GetAllServiceInfoParam{PageNo: 1, PageSize: 1})
	if err != nil {
		return nil, err
	}
	all, err := n.naming().GetAllServicesInfo(vo.GetAllServiceInfoParam{PageNo: 1, PageSize: uint32(first.Count) + 1})
	if err != nil {
		return nil, err
	}
	return all.Doms, nil
}

func (n *nacosRegistry) Watch(opts ...registry.WatchOption) (registry.Watcher, error) {
	var wo registry.WatchOptions
	for _, o := range opts {
		o(&wo)
	}
	names := []string{wo.Service}
	if wo.Service == "" {
		var err error
		if names, err = n.serviceNames(); err != nil {
			return nil, err
		}
	}
	w := &watcher{
		reg:    n,
		client: n.naming(),
		next:   make(chan *registry.Result, 64),
		exit:   make(chan struct{}),
		known:  map[string]map[string]model.Instance{},
	}
	for _, name := range names {
		if err := w.subscribe(name); err != nil {
			w.Stop()
			return nil, err
		}
	}
	return w, nil
}

func (n *nacosRegistry) String() string { return "nacos" }

// watcher turns the SDK's pushed instance lists into go-micro create/update/delete
// results, comparing each list with the last one seen for that service.
type watcher struct {
	reg    *nacosRegistry
	client naming_client.INamingClient
	next   chan *registry.Result
	exit   chan struct{}
	stop   sync.Once

	mu     sync.Mutex
	known  map[string]map[string]model.Instance // service → node id → instance
	params []*vo.SubscribeParam
}

func (w *watcher) subscribe(name string) error {
	// What the SDK holds now is the base line: it calls back only on a change.
	w.mu.Lock()
	w.known[name] = map[string]model.Instance{}
	if service, err := w.client.GetService(vo.GetServiceParam{ServiceName: name}); err == nil {
		for _, i := range service.Hosts {
			if usable(i) {
				w.known[name][instanceID(i)] = i
			}
		}
	}
	param := &vo.SubscribeParam{ServiceName: name, GroupName: constant.DEFAULT_GROUP}
	param.SubscribeCallback = func(instances []model.Instance, err error) {
		if err == nil {
			w.changed(name, instances)
		}
	}
	w.mu.Unlock()
	if err := w.client.Subscribe(param); err != nil {
		return err
	}
	w.mu.Lock()
	w.params = append(w.params, param)
	w.mu.Unlock()
	w.reg.mu.Lock()
	w.reg.watching[name]++
	w.reg.mu.Unlock()
	return nil
}

func (w *watcher) changed(name string, instances []model.Instance) {
	w.mu.Lock()
	old := w.known[name]
	now := map[string]model.Instance{}
	var results []*registry.Result
	for _, i := range instances {
		if !usable(i) {
			continue
		}
		id := instanceID(i)
		now[id] = i
		if before, ok := old[id]; !ok {
			results = append(results, &registry.Result{Action: "create", Service: asService(name, i)})
		} else if !reflect.DeepEqual(before, i) {
			results = append(results, &registry.Result{Action: "update", Service: asService(name, i)})
		}
	}
	for id, i := range old {
		if _, ok := now[id]; !ok {
			results = append(results, &registry.Result{Action: "delete", Service: asService(name, i)})
		}
	}
	w.known[name] = now
	w.mu.Unlock()
	for _, r := range results {
		select {
		case w.next <- r:
		case <-w.exit:
			return
		}
	}
}

func (w *watcher) Next() (*registry.Result, error) {
	select {
	case r := <-w.next:
		return r, nil
	case <-w.exit:
		return nil, registry.ErrWatcherStopped
	}
}

func (w *watcher) Stop() {
	w.stop.Do(func() {
		close(w.exit)
		w.mu.Lock()
		params := w.params
		w.mu.Unlock()
		for _, p := range params {
			_ = w.client.Unsubscribe(p)
			w.reg.mu.Lock()
			w.reg.watching[p.ServiceName]--
			w.reg.mu.Unlock()
		}
	})
}

// Watching tells whether a watch of service is subscribed. go-micro's registry cache
// answers its first lookup of a service from GetService and only then starts watching it
// (in a goroutine, after up to 100 ms of jitter); a change in between reaches the cache
// only when its entry expires (a minute), so a test that changes the registry waits for
// this first.
func Watching(r registry.Registry, service string) bool {
	n, ok := r.(*nacosRegistry)
	if !ok {
		return false
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.watching[service] > 0
}

// Close ends the registry's nacos-sdk-go client (its gRPC connection), as a process
// exit would.
func Close(r registry.Registry) {
	if n, ok := r.(*nacosRegistry); ok {
		n.naming().CloseClient()
	}
}
