package main

// The grpc-go scenario: grpc-go's own DNS resolver over roster's DNS, with the
// round_robin policy that the service's metadata (grpc_config, served as a TXT record)
// asks for.
//
// Three grpc-go servers (the standard health service) listen on one port of three
// loopback addresses and are registered over HTTP v1, beating. A client dials
// dns://<roster DNS>/<service>.roster:<port>. What it shows:
//   - all healthy: calls reach every instance (round_robin, from the TXT record: grpc-go's
//     default, pick_first, would send them all to one);
//   - one instance turns unhealthy (its beats stop) but keeps serving: roster's DNS drops
//     it, yet grpc-go keeps calling it, because its DNS resolver re-resolves only when
//     asked (a connection lost), never on a timer or on the TTL;
//   - the instance stops serving too (what a dead process looks like): the lost
//     connection makes grpc-go re-resolve, and the address leaves its list: restarted
//     and healthy again, it gets no call on that channel until the next re-resolution;
//   - a new channel resolves afresh and reaches all three again.

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver/dns"
)

func init() { scenarios["grpc-dns"] = runGrpcDNS }

// grpcdnsBackend is one instance: a grpc-go server on host:port, the calls it answered,
// and whether its beats to roster go on.
type grpcdnsBackend struct {
	host    string
	port    int
	srv     *grpc.Server
	maxAge  time.Duration
	served  atomic.Int64
	beating atomic.Bool
}

func (b *grpcdnsBackend) addr() string { return net.JoinHostPort(b.host, strconv.Itoa(b.port)) }

// serve starts the server on l.
func (b *grpcdnsBackend) serve(l net.Listener) {
	opts := []grpc.ServerOption{grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		b.served.Add(1)
		return h(ctx, req)
	})}
	if b.maxAge > 0 {
		opts = append(opts, grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionAge: b.maxAge, MaxConnectionAgeGrace: time.Second,
		}))
	}
	b.srv = grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(b.srv, health.NewServer())
	go b.srv.Serve(l)
}

// grpcdnsListen finds a port free on every host and listens there.
func grpcdnsListen(hosts []string) (int, []net.Listener) {
	for attempt := 0; attempt < 20; attempt++ {
		first, err := net.Listen("tcp", net.JoinHostPort(hosts[0], "0"))
		check("listen", err)
		port := first.Addr().(*net.TCPAddr).Port
		ls := []net.Listener{first}
		for _, h := range hosts[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(h, strconv.Itoa(port)))
			if err != nil {
				break
			}
			ls = append(ls, l)
		}
		if len(ls) == len(hosts) {
			return port, ls
		}
		for _, l := range ls {
			l.Close()
		}
	}
	fail("listen", "no port free on all of %v in 20 tries", hosts)
	return 0, nil
}

// grpcdnsLookup asks roster's DNS server directly (no cache) for name's addresses.
func grpcdnsLookup(dnsAddr, name string) ([]string, error) {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, dnsAddr)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	addrs, err := r.LookupHost(ctx, name)
	sort.Strings(addrs)
	return addrs, err
}

func grpcdnsTXT(dnsAddr, name string) ([]string, error) {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, dnsAddr)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return r.LookupTXT(ctx, name)
}

// grpcdnsCalls makes n health checks on conn and counts them by the instance that
// answered (the peer of the call); failed calls are counted under "error".
func grpcdnsCalls(conn *grpc.ClientConn, n int) map[string]int {
	client := healthpb.NewHealthClient(conn)
	counts := map[string]int{}
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var p peer.Peer
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p))
		cancel()
		if err != nil {
			counts["error"]++
			continue
		}
		counts[p.Addr.String()]++
	}
	return counts
}

// grpcdnsFor calls for d, pausing 20 ms between calls, and counts as grpcdnsCalls.
func grpcdnsFor(conn *grpc.ClientConn, d time.Duration) map[string]int {
	counts := map[string]int{}
	for end := time.Now().Add(d); time.Now().Before(end); {
		for k, v := range grpcdnsCalls(conn, 1) {
			counts[k] += v
		}
		time.Sleep(20 * time.Millisecond)
	}
	return counts
}

func runGrpcDNS(args []string) {
	fs := flag.NewFlagSet("grpc-dns", flag.ExitOnError)
	serverAddr := fs.String("server", "127.0.0.1:8848", "roster HTTP address")
	user := fs.String("username", "nacos", "user")
	pass := fs.String("password", "", "password")
	dnsAddr := fs.String("dns", "127.0.0.1:8600", "roster's DNS address (--dns)")
	domain := fs.String("domain", "roster", "roster's DNS zone (--dns-domain), without the dot")
	service := fs.String("service", fmt.Sprintf("grpc-dns-%d", os.Getpid()), "service name")
	hostList := fs.String("hosts", "127.0.40.1,127.0.40.2,127.0.40.3", "loopback addresses of the instances")
	beatTimeout := fs.Duration("beat-timeout", 3*time.Second, "the instances' beat timeout (preserved.heart.beat.timeout)")
	minResolution := fs.Duration("min-resolution", 0, "grpc-go's minimum interval between resolutions (0: its default, 30 s)")
	maxAge := fs.Duration("max-connection-age", 0, "the servers' MaxConnectionAge (0: none, grpc-go's default)")
	fs.Parse(args)
	watchdog(150 * time.Second)

	hosts := strings.Split(*hostList, ",")
	if len(hosts) < 3 {
		fail("flags", "-hosts needs three addresses, got %q", *hostList)
	}
	api := newRosterHTTP(*serverAddr, *user, *pass)
	port, listeners := grpcdnsListen(hosts)
	backends := make([]*grpcdnsBackend, len(hosts))
	for i, h := range hosts {
		backends[i] = &grpcdnsBackend{host: h, port: port, maxAge: *maxAge}
		backends[i].serve(listeners[i])
	}
	defer func() {
		for _, b := range backends {
			b.srv.Stop()
		}
	}()

	// Register, and beat every 500 ms while beating is on.
	meta := fmt.Sprintf(`{"preserved.heart.beat.interval":"500","preserved.heart.beat.timeout":"%d","preserved.ip.delete.timeout":"600000"}`, beatTimeout.Milliseconds())
	stop := make(chan struct{})
	var beats sync.WaitGroup
	defer func() { close(stop); beats.Wait() }()
	for _, b := range backends {
		params := url.Values{"serviceName": {*service}, "ip": {b.host}, "port": {strconv.Itoa(port)}}
		reg := url.Values{"metadata": {meta}}
		for k, v := range params {
			reg[k] = v
		}
		_, err := api.must("POST", "/nacos/v1/ns/instance", reg)
		check("register", err)
		b.beating.Store(true)
		beats.Add(1)
		go func(b *grpcdnsBackend) {
			defer beats.Done()
			t := time.NewTicker(500 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					if b.beating.Load() {
						api.call("PUT", "/nacos/v1/ns/instance/beat", params)
					}
				}
			}
		}(b)
	}
	// The service config, as README's DNS section stores it: round_robin.
	grpcConfig := `[{"serviceConfig":{"loadBalancingConfig":[{"round_robin":{}}]}}]`
	_, err := api.must("PUT", "/nacos/v1/ns/service", url.Values{
		"serviceName": {*service},
		"metadata":    {fmt.Sprintf(`{"grpc_config":%q}`, grpcConfig)},
	})
	check("service_config", err)

	name := *service + "." + *domain
	names := func(want []string) func() string {
		return func() string {
			got, err := grpcdnsLookup(*dnsAddr, name)
			if err != nil && len(want) > 0 {
				return err.Error()
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				return fmt.Sprintf("DNS names %v, want %v", got, want)
			}
			return ""
		}
	}
	if _, why := waitFor(10*time.Second, names(hosts)); why != "" {
		fail("dns", "%s", why)
	}
	txt, err := grpcdnsTXT(*dnsAddr, "_grpc_config."+name)
	check("dns", err)
	if len(txt) != 1 || txt[0] != "grpc_config="+grpcConfig {
		fail("dns", "TXT _grpc_config.%s is %q", name, txt)
	}
	target := fmt.Sprintf("dns://%s/%s:%d", *dnsAddr, name, port)
	step("dns", map[string]any{"target": target, "a": hosts, "txt": txt[0]})

	if *minResolution > 0 {
		dns.SetMinResolutionInterval(*minResolution)
	}
	dns.SetResolvingTimeout(5 * time.Second)
	effectiveMin := *minResolution
	if effectiveMin == 0 {
		effectiveMin = 30 * time.Second
	}
	// A short reconnect back-off, so that an address still in the channel's list is
	// reconnected within a second of its server coming back.
	dial := func() *grpc.ClientConn {
		conn, err := grpc.NewClient(target,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
				MinConnectTimeout: time.Second,
			}))
		check("dial", err)
		return conn
	}
	everyone := func(conn *grpc.ClientConn, want []*grpcdnsBackend) func() string {
		return func() string {
			counts := grpcdnsCalls(conn, 3*len(want))
			for _, b := range want {
				if counts[b.addr()] == 0 {
					return fmt.Sprintf("calls reached %v, not %s", counts, b.addr())
				}
			}
			return ""
		}
	}

	// 1. All healthy: every instance answers.
	dialed := time.Now()
	conn := dial()
	defer conn.Close()
	if _, why := waitFor(15*time.Second, everyone(conn, backends)); why != "" {
		fail("all_healthy", "%s", why)
	}
	counts := grpcdnsCalls(conn, 30)
	for _, b := range backends {
		if counts[b.addr()] == 0 || counts["error"] > 0 {
			fail("all_healthy", "30 calls: %v, want every instance and no error", counts)
		}
	}
	step("all_healthy", map[string]any{"calls": counts})

	// 2. The third turns unhealthy (beats stop) but keeps serving.
	gone := backends[2]
	gone.beating.Store(false)
	silent := time.Now()
	if _, why := waitFor(*beatTimeout+10*time.Second, func() string {
		listed, err := api.instances("", "", *service)
		if err != nil {
			return err.Error()
		}
		if h, ok := listed[gone.addr()]; !ok || h {
			return fmt.Sprintf("roster lists %v", listed)
		}
		return names(hosts[:2])()
	}); why != "" {
		fail("unhealthy", "%s", why)
	}
	step("unhealthy", map[string]any{"instance": gone.addr(), "ms": time.Since(silent).Milliseconds()})
	if *maxAge > 0 {
		grpcdnsAged(conn, backends, *maxAge, effectiveMin, names(hosts))
	} else {
		grpcdnsUnaged(conn, backends, dialed, effectiveMin, names(hosts))
	}

	// 4. A new channel resolves afresh and reaches all three.
	fresh := dial()
	defer fresh.Close()
	if _, why := waitFor(15*time.Second, everyone(fresh, backends)); why != "" {
		fail("redial", "%s", why)
	}
	counts = grpcdnsCalls(fresh, 30)
	for _, b := range backends {
		if counts[b.addr()] == 0 {
			fail("redial", "30 calls on a new channel: %v, want every instance", counts)
		}
	}
	served := map[string]int64{}
	for _, b := range backends {
		served[b.addr()] = b.served.Load()
	}
	step("redial", map[string]any{"calls": counts, "served_total": served})
	step("done", nil)
}

// grpcdnsUnaged: servers without MaxConnectionAge, as grpc-go's defaults have it. The
// unhealthy instance stays in the rotation while it serves; once it stops, the lost
// connection re-resolves it away, and it does not come back on this channel.
func grpcdnsUnaged(conn *grpc.ClientConn, backends []*grpcdnsBackend, dialed time.Time, effectiveMin time.Duration, namesAll func() string) {
	gone := backends[2]
	// Longer than the DNS TTL and than the minimum interval: neither makes grpc-go ask.
	window := 3 * time.Second
	if 2*effectiveMin > window && effectiveMin < 10*time.Second {
		window = 2 * effectiveMin
	}
	counts := grpcdnsFor(conn, window)
	if counts[gone.addr()] == 0 {
		fail("still_in_rotation", "for %s after roster's DNS dropped %s, calls reached %v: grpc-go re-resolved without a lost connection", window, gone.addr(), counts)
	}
	step("still_in_rotation", map[string]any{"window_ms": window.Milliseconds(), "calls": counts})

	// 3. It stops serving as well: the lost connection makes grpc-go re-resolve, no
	// sooner than the minimum interval after the last resolution (at dial time here),
	// and the reconnection attempts that fail meanwhile ask for one more resolution, a
	// minimum interval later; after that nothing asks again. Wait for both.
	gone.srv.Stop()
	stopped := time.Now()
	settled := stopped.Add(2*effectiveMin + 2*time.Second)
	if first := dialed.Add(effectiveMin); first.After(stopped) {
		settled = first.Add(effectiveMin + 2*time.Second)
	}
	time.Sleep(time.Until(settled))
	counts = grpcdnsCalls(conn, 20)
	if counts[gone.addr()] > 0 || counts["error"] > 0 || counts[backends[0].addr()] == 0 || counts[backends[1].addr()] == 0 {
		fail("left_rotation", "after %s stopped, calls reached %v", gone.addr(), counts)
	}
	// It comes back, serving and beating: healthy, and named by roster's DNS again. The
	// channel has dropped its address at the re-resolution, so nothing reconnects to it
	// until the next one (a short back-off would have reconnected it within a second
	// were it still listed).
	l, err := net.Listen("tcp", gone.addr())
	check("restart", err)
	gone.serve(l)
	gone.beating.Store(true)
	if _, why := waitFor(10*time.Second, namesAll); why != "" {
		fail("left_rotation", "%s", why)
	}
	before := gone.served.Load()
	counts = grpcdnsFor(conn, 3*time.Second)
	if counts[gone.addr()] > 0 || gone.served.Load() != before {
		fail("left_rotation", "the channel still calls %s after re-resolving: %v", gone.addr(), counts)
	}
	step("left_rotation", map[string]any{
		"instance": gone.addr(), "stopped_ms": time.Since(stopped).Milliseconds(), "calls_after_return": counts,
	})
}

// grpcdnsAged: servers with MaxConnectionAge, the remedy gRPC recommends for DNS-balanced
// services. Every connection ends at its age, each end makes the channel re-resolve, so
// the unhealthy instance leaves the rotation while it still serves, and joins again once
// healthy, on the same channel.
func grpcdnsAged(conn *grpc.ClientConn, backends []*grpcdnsBackend, maxAge, effectiveMin time.Duration, namesAll func() string) {
	gone := backends[2]
	// A connection lives maxAge ± 10 %, then its grace; the re-resolution it asks for
	// comes no sooner than the minimum interval after the last one.
	bound := maxAge*11/10 + time.Second + 2*effectiveMin + 5*time.Second
	left := time.Now()
	if _, why := waitFor(bound, func() string {
		counts := grpcdnsCalls(conn, 9)
		if counts[gone.addr()] > 0 || counts["error"] > 0 {
			return fmt.Sprintf("calls reached %v", counts)
		}
		return ""
	}); why != "" {
		fail("left_rotation_serving", "%s still called %s after roster's DNS dropped it: %s", bound, gone.addr(), why)
	}
	took := time.Since(left)
	// It stays out (several connection ages), and it still serves: a direct channel to
	// it is answered.
	counts := grpcdnsFor(conn, maxAge*2)
	if counts[gone.addr()] > 0 || counts["error"] > 0 {
		fail("left_rotation_serving", "after leaving, calls reached %v", counts)
	}
	direct, err := grpc.NewClient(gone.addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	check("left_rotation_serving", err)
	defer direct.Close()
	if c := grpcdnsCalls(direct, 3); c[gone.addr()] != 3 {
		fail("left_rotation_serving", "%s does not answer directly: %v", gone.addr(), c)
	}
	step("left_rotation_serving", map[string]any{"instance": gone.addr(), "ms": took.Milliseconds(), "calls_after": counts})

	// Its beats resume: healthy, named again, and back in the rotation of the same
	// channel at a later connection's end.
	gone.beating.Store(true)
	if _, why := waitFor(10*time.Second, namesAll); why != "" {
		fail("rejoined", "%s", why)
	}
	back := time.Now()
	if _, why := waitFor(bound, func() string {
		counts := grpcdnsCalls(conn, 9)
		if counts[gone.addr()] == 0 {
			return fmt.Sprintf("calls reached %v", counts)
		}
		return ""
	}); why != "" {
		fail("rejoined", "%s", why)
	}
	step("rejoined", map[string]any{"instance": gone.addr(), "ms": time.Since(back).Milliseconds()})
}
