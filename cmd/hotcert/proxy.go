package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/proxy"
	"github.com/hotcert/hotcert/revocation"
	"github.com/hotcert/hotcert/source/file"
)

// proxyFlags are the flags of hotcert proxy server and hotcert proxy client.
type proxyFlags struct {
	listen, target, mode        string
	certFiles, keyFiles         []string
	bundles                     []string
	spiffe                      spiffeFlags // proxyspiffe.go
	caFile                      string
	allowDNS, allowURI, allowID []string
	allowAll                    bool
	peerHeader                  string
	proxyProtocol, backendH2C   bool
	alpn                        []string
	serverName                  string
	drainWindow, drainGrace     time.Duration
	idle, maxAge                time.Duration
	pollInterval, settle        time.Duration
	metricsAddr, component      string
	metricsPrefix, metricsLbl   string
	deny                        denyListFlags
}

func newProxyCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "A TLS sidecar with hotcert's rotation, for programs that cannot reload",
		Long: `Give a program that cannot reload its certificates hotcert's rotation, without
embedding anything: "hotcert proxy server" terminates TLS (mTLS with --ca-file) in
front of its plaintext port or unix socket, "hotcert proxy client" takes its
plaintext connections and originates mTLS to a remote service. docs/proxy.md.`,
	}
	cmd.AddCommand(newProxyServerCommand(g), newProxyClientCommand(g))
	return cmd
}

func (f *proxyFlags) addCommon(fl *pflag.FlagSet) {
	fl.StringVar(&f.mode, "mode", string(proxy.ModeTCP), "tcp (forward bytes, any protocol) or http (HTTP/1.1, HTTP/2 and gRPC, protocol-aware drains)")
	fl.StringArrayVar(&f.certFiles, "cert-file", nil, "certificate chain file (PEM, leaf first); repeat with --key-file for several identities, chosen by SNI (the first is the default)")
	fl.StringArrayVar(&f.keyFiles, "key-file", nil, "private key file (PEM) of the --cert-file of the same position")
	fl.StringArrayVar(&f.bundles, "credential-bundle", nil, "file holding a private key and its certificate chain (a podCertificate volume's credentialBundlePath); repeatable, after the --cert-file identities")
	f.spiffe.add(fl)
	fl.StringSliceVar(&f.allowDNS, "allow-dns", nil, "allow peers whose certificate has this DNS SAN (repeatable)")
	fl.StringSliceVar(&f.allowURI, "allow-uri", nil, "allow peers whose certificate has this URI SAN (repeatable)")
	fl.StringSliceVar(&f.allowID, "allow-spiffe-id", nil, "allow peers with this SPIFFE ID, or any ID of the trust domain given as spiffe://domain (repeatable)")
	fl.DurationVar(&f.drainWindow, "drain-window", defaultDrainWindow, "after the proxy's certificate rotates, end each connection opened under the previous one at a random time within this window (0: all at once)")
	fl.DurationVar(&f.drainGrace, "drain-grace", proxy.DefaultGrace, "how long a drained connection may stay busy before it is closed; also bounds the drain on SIGTERM")
	fl.DurationVar(&f.idle, "idle", proxy.DefaultIdle, "tcp mode: a connection that moved no byte for this long is idle, and a drain closes it first")
	fl.DurationVar(&f.maxAge, "max-connection-age", 0, "tcp mode: close connections once about this old (+/-10%) and idle, within --drain-grace at the latest, rotation or not (0: never)")
	fl.DurationVar(&f.pollInterval, "poll-interval", hotcert.DefaultPollInterval, "re-read the files this often even without a file event")
	fl.DurationVar(&f.settle, "settle", hotcert.DefaultSettle, "how long files that do not load are treated as mid-write before it counts as a failure")
	fl.StringVar(&f.metricsAddr, "metrics-bind-address", "", "serve /metrics and /healthz on this address (off when empty)")
	fl.StringVar(&f.component, "component", "proxy", "component name in logs and metrics; further identities are COMPONENT_2, ..., the --ca-file bundle COMPONENT_ca")
	fl.StringVar(&f.metricsPrefix, "metrics-prefix", "hotcert", "prefix of the TLS reload metrics")
	fl.StringVar(&f.metricsLbl, "metrics-component-label", "component", "label carrying the component in the TLS metrics and log lines")
}

func newProxyServerCommand(g *globals) *cobra.Command {
	f := &proxyFlags{}
	cmd := &cobra.Command{
		Use:   "server --listen ADDR --target ADDR --cert-file F --key-file F [--ca-file F --allow-... | --allow-all]",
		Short: "Terminate TLS or mTLS in front of a local plaintext port or unix socket",
		Long: `Terminate TLS in front of a program's plaintext port or unix socket (--target).
The certificate is followed like every hotcert process follows it: the next
handshake serves a renewal, a bad write is refused (one log line, one count) and
the last good certificate keeps serving. After a renewal, connections opened
under the previous certificate end over --drain-window: in http mode with
"Connection: close" (HTTP/1) or a GOAWAY (HTTP/2, gRPC) once their requests finish;
in tcp mode each one as soon as it is idle, within --drain-grace at the latest.

With --ca-file, clients must present a certificate that chains to that bundle,
and must be allowed by --allow-dns, --allow-uri or --allow-spiffe-id (or
--allow-all); a connection whose client no longer verifies after the bundle
changes is cut at once. --deny-list and --crl-file revoke client certificates:
refused at every handshake (resumed sessions too), and the open connections of a
certificate the list adds are closed at once. --peer-header (http) or
--proxy-protocol (tcp) pass the verified client identity to the program.`,
		Example: `  hotcert proxy server --listen :8443 --target 127.0.0.1:8080 --cert-file /tls/tls.crt --key-file /tls/tls.key
  hotcert proxy server --mode http --listen :8443 --target unix:///run/app.sock --cert-file /tls/tls.crt --key-file /tls/tls.key \
      --ca-file /ca/ca.crt --allow-spiffe-id spiffe://example.org/ns/shop/sa/web --peer-header X-Forwarded-Client-Cert`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runProxy(cmd.Context(), g, f, true) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", ":8443", "address clients connect to with TLS")
	fl.StringVar(&f.target, "target", "", "the program's plaintext address: host:port or unix:///path (required)")
	fl.StringVar(&f.caFile, "ca-file", "", "require client certificates (mTLS) that chain to this CA bundle file")
	fl.BoolVar(&f.allowAll, "allow-all", false, "with --ca-file: allow every client whose certificate verifies")
	fl.StringVar(&f.peerHeader, "peer-header", "", "http mode: pass the verified client identity in this header (e.g. X-Forwarded-Client-Cert; any the client sent is removed)")
	fl.BoolVar(&f.proxyProtocol, "proxy-protocol", false, "tcp mode: start every connection to the target with a PROXY protocol v2 header (client address, TLS version, SNI, ALPN, client CN and certificate)")
	fl.BoolVar(&f.backendH2C, "target-h2c", false, "http mode: speak HTTP/2 without TLS to the target for every request (default: gRPC over h2c, the rest over HTTP/1.1)")
	fl.StringSliceVar(&f.alpn, "alpn", nil, "tcp mode: ALPN protocols to offer (e.g. h2 in front of a gRPC server)")
	f.deny.register(fl, "with --ca-file: refuse, and disconnect at once, clients whose certificate")
	f.addCommon(fl)
	return cmd
}

func newProxyClientCommand(g *globals) *cobra.Command {
	f := &proxyFlags{}
	cmd := &cobra.Command{
		Use:   "client --listen ADDR --target HOST:PORT --ca-file F [--cert-file F --key-file F]",
		Short: "Take a local program's plaintext connections and originate mTLS to a remote service",
		Long: `Accept a local program's plaintext connections (--listen, a loopback port or a
unix socket) and open each to --target with TLS: the remote's certificate is
verified against --ca-file (re-read as it changes) for --server-name or the
target's host, and the client certificate of --cert-file/--key-file is presented
when the remote asks. --allow-* authorize the remote by identity. After the
client certificate rotates, connections opened under the previous one move onto
the new one over --drain-window (tcp mode: once idle; http mode: as requests
finish, new requests going to new connections). --deny-list and --crl-file
revoke remote certificates: refused at every handshake, and the open connections
to a remote whose certificate the list adds are closed at once.`,
		Example: `  hotcert proxy client --listen 127.0.0.1:6379 --target redis.shop.svc:6380 --ca-file /ca/ca.crt --cert-file /tls/tls.crt --key-file /tls/tls.key`,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return runProxy(cmd.Context(), g, f, false) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", "127.0.0.1:8080", "local plaintext address: host:port or unix:///path")
	fl.StringVar(&f.target, "target", "", "remote TLS service, host:port (required)")
	fl.StringVar(&f.caFile, "ca-file", "", "CA bundle the remote's certificate is verified against (required)")
	fl.StringVar(&f.serverName, "server-name", "", "name the remote's certificate must match, sent as SNI (default: the host of --target)")
	fl.StringSliceVar(&f.alpn, "alpn", nil, "tcp mode: ALPN protocols to offer")
	f.deny.register(fl, "refuse, and disconnect at once from, a remote whose certificate")
	f.addCommon(fl)
	return cmd
}

func runProxy(ctx context.Context, g *globals, f *proxyFlags, server bool) error {
	log, err := g.logger()
	if err != nil {
		return err
	}
	if err := f.check(server); err != nil {
		return err
	}
	reg := newProcessRegistry()
	mopts := []metrics.Option{metrics.WithPrefix(f.metricsPrefix), metrics.WithComponentLabel(f.metricsLbl)}
	rec, err := metrics.New(reg, mopts...)
	if err != nil {
		return err
	}
	drains, err := metrics.NewDrain(reg, mopts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	rs := &proxyReloaders{log: log, f: f, rec: rec}
	defer func() { cancel(); rs.wait() }() // the reloaders stop with ctx, on every return
	ids, trust, err := rs.load(ctx)
	if err != nil {
		return err
	}
	deny, denyMetrics, err := rs.loadDenyList(ctx, trust, reg, mopts)
	if err != nil {
		return err
	}
	opts := []proxy.Option{
		proxy.WithMode(proxy.Mode(f.mode)), proxy.WithAllow(proxy.Allow{DNSNames: f.allowDNS, URIs: f.allowURI, SPIFFEIDs: f.allowID}),
		proxy.WithDrainWindow(f.drainWindow), proxy.WithGrace(f.drainGrace), proxy.WithIdle(f.idle),
		proxy.WithLogger(log), proxy.WithObserver(drains), proxy.WithComponent(f.component), proxy.WithComponentLabel(f.metricsLbl),
		proxy.WithNextProtos(f.alpn...),
	}
	if f.maxAge != 0 {
		opts = append(opts, proxy.WithMaxConnectionAge(f.maxAge))
	}
	if f.peerHeader != "" {
		opts = append(opts, proxy.WithPeerHeader(f.peerHeader))
	}
	if f.proxyProtocol {
		opts = append(opts, proxy.WithProxyProtocol())
	}
	if f.backendH2C {
		opts = append(opts, proxy.WithBackendH2C())
	}
	if f.serverName != "" {
		opts = append(opts, proxy.WithServerName(f.serverName))
	}
	if trust != nil {
		opts = append(opts, proxy.WithTrust(trust))
	}
	if deny != nil {
		opts = append(opts, proxy.WithDenyList(deny))
	}
	var p proxyRunner
	if server {
		target, err := proxy.ParseTarget(f.target)
		if err != nil {
			return fmt.Errorf("--target: %w", err)
		}
		if p, err = proxy.NewServer(target, ids, opts...); err != nil {
			return err
		}
	} else {
		id := trust
		if len(ids) > 0 {
			id = ids[0]
		}
		if p, err = proxy.NewClient(f.target, id, opts...); err != nil {
			return err
		}
	}
	if deny != nil {
		countDenied(denyMetrics, f.component, p, deny)
	}
	lt, err := proxy.ParseTarget(f.listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	if lt.Network == "unix" {
		_ = os.Remove(lt.Address) // a socket a previous run left behind
	}
	ln, err := net.Listen(lt.Network, lt.Address)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", f.listen, err)
	}
	wait := func() {}
	if f.metricsAddr != "" {
		if wait, err = serveObservability(ctx, f.metricsAddr, reg, proxyHealth(p, deny), log); err != nil {
			ln.Close()
			return err
		}
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(ln) }()
	log.Info("proxy listening", "side", map[bool]string{true: "server", false: "client"}[server], "mode", f.mode,
		"addr", ln.Addr().String(), "target", f.target, f.metricsLbl, f.component, "mtls", f.caFile != "" || f.spiffe.socket != "" || !server,
		"identities", len(ids), "drain_window", f.drainWindow.String())
	select {
	case err = <-served:
	case <-ctx.Done():
		log.Info("proxy shutting down: draining connections", "grace", f.drainGrace.String())
		sctx, scancel := context.WithTimeout(context.Background(), f.drainGrace)
		if serr := p.Shutdown(sctx); serr != nil {
			log.Warn("proxy shutdown: connections still open at the end of the grace period were closed", "error", serr.Error())
		}
		scancel()
		err = <-served
	}
	cancel()
	wait()
	if errors.Is(err, proxy.ErrServerClosed) {
		return nil
	}
	return err
}

// proxyRunner is what runProxy needs of a proxy.Server or proxy.Client.
type proxyRunner interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
	Serving() bool
}

// proxyHealth serves the proxy's status as JSON (proxyStatus): 200 once it
// accepts connections (its material is loaded before it exists), 503 before and
// while it shuts down, 400 for a ?revoked_serial that is not hex.
func proxyHealth(p proxyRunner, deny *revocation.Reloader) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st, err := proxyStatus(p, deny, r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if !p.Serving() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(st)
	})
}

func (f *proxyFlags) check(server bool) error {
	if err := f.spiffe.check(f); err != nil {
		return err
	}
	spiffe := f.spiffe.socket != ""
	switch {
	case f.target == "":
		return errors.New("--target is required: " + map[bool]string{true: "the program's plaintext address, host:port or unix:///path", false: "the remote TLS service, host:port"}[server])
	case len(f.certFiles) != len(f.keyFiles):
		return fmt.Errorf("--cert-file and --key-file go in pairs: %d certificate files, %d key files", len(f.certFiles), len(f.keyFiles))
	case server && len(f.certFiles)+len(f.bundles) == 0 && !spiffe:
		return errors.New("--cert-file and --key-file (or --credential-bundle, or --spiffe-socket) are required: the certificate the proxy serves")
	case !server && f.caFile == "" && !spiffe:
		return errors.New("--ca-file is required (or --spiffe-socket): the CA bundle the remote's certificate is verified against")
	case server && f.caFile == "" && !spiffe && (f.allowAll || len(f.allowDNS)+len(f.allowURI)+len(f.allowID) > 0):
		return errors.New("--allow-* need --ca-file: clients are authorized by their certificates")
	case server && f.caFile == "" && !spiffe && (f.deny.list != "" || f.deny.crl != ""):
		return errProxyDenyWithoutCA
	case server && (f.caFile != "" || spiffe) && !f.allowAll && len(f.allowDNS)+len(f.allowURI)+len(f.allowID) == 0:
		return errors.New(map[bool]string{false: "--ca-file", true: "--spiffe-socket"}[spiffe] + " needs --allow-dns, --allow-uri, --allow-spiffe-id or --allow-all: which clients may connect")
	}
	return nil
}

// proxyReloaders loads and follows the proxy's sources, one reloader each.
type proxyReloaders struct {
	log   *slog.Logger
	f     *proxyFlags
	rec   *metrics.Recorder
	dones []chan struct{}
}

func (rs *proxyReloaders) load(ctx context.Context) (ids []hotcert.Provider, trust hotcert.Provider, err error) {
	f := rs.f
	if f.spiffe.socket != "" { // one reloader for the SVID and the bundle
		r, err := rs.followSPIFFE(ctx)
		if err != nil {
			return nil, nil, err
		}
		return []hotcert.Provider{r}, r, nil
	}
	var srcs []file.Option
	var flags []flagFiles
	for i := range f.certFiles {
		srcs = append(srcs, file.WithKeyPair(f.certFiles[i], f.keyFiles[i]))
		flags = append(flags, fileFlags("--cert-file", f.certFiles[i], "--key-file", f.keyFiles[i]))
	}
	for _, b := range f.bundles {
		srcs = append(srcs, file.WithCredentialBundle(b))
		flags = append(flags, fileFlags("--credential-bundle", b))
	}
	for i, so := range srcs {
		name := f.component
		if i > 0 {
			name = fmt.Sprintf("%s_%d", f.component, i+1)
		}
		r, err := rs.follow(ctx, name, flags[i], so)
		if err != nil {
			return nil, nil, err
		}
		ids = append(ids, r)
	}
	if f.caFile != "" {
		r, err := rs.follow(ctx, f.component+"_ca", fileFlags("--ca-file", f.caFile), file.WithCA(f.caFile))
		if err != nil {
			return nil, nil, err
		}
		trust = r
	}
	return ids, trust, nil
}

// follow loads one source and follows it until ctx ends.
func (rs *proxyReloaders) follow(ctx context.Context, component string, ff flagFiles, opt file.Option) (*hotcert.Reloader, error) {
	src, err := file.New(opt, file.WithLogger(rs.log))
	if err != nil {
		return nil, err
	}
	r, err := hotcert.New(ctx, src, hotcert.WithComponent(component), hotcert.WithComponentLabel(rs.f.metricsLbl),
		hotcert.WithLogger(rs.log), hotcert.WithObserver(rs.rec),
		hotcert.WithPollInterval(rs.f.pollInterval), hotcert.WithSettle(rs.f.settle))
	if err != nil {
		return nil, inUserTerms(err, ff)
	}
	done := make(chan struct{})
	rs.dones = append(rs.dones, done)
	go func() {
		defer close(done)
		if err := r.Start(ctx); err != nil && ctx.Err() == nil {
			rs.log.Error("proxy: following the source failed", "source", src.String(), "error", err.Error())
		}
	}()
	return r, nil
}

// wait waits for the reloaders to stop (after ctx ended).
func (rs *proxyReloaders) wait() {
	for _, d := range rs.dones {
		<-d
	}
}

var (
	_ proxyRunner = (*proxy.Server)(nil)
	_ proxyRunner = (*proxy.Client)(nil)
)
