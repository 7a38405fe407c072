//go:build unix

package bench_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/proxy"
	"github.com/hotcert/hotcert/source/file"
)

// proxyBench is one way of reaching the backend over TLS: its name and the URL a
// client asks for.
type proxyBench struct {
	name string
	url  string
}

// proxyRows starts the backend and every way to reach it: direct (the backend
// itself with a static tls.Config), floor (net/http/httputil.ReverseProxy with a
// static tls.Config: the least a TLS-terminating Go reverse proxy costs),
// hotcert-http and hotcert-tcp (hotcert proxy server following the PKI's files),
// and ghostunnel when $GHOSTUNNEL names its binary; last, plain-hop, the
// backend's plaintext port itself.
func proxyRows(b *testing.B, p *pki) []proxyBench {
	small, large := bytes.Repeat([]byte("s"), 64), bytes.Repeat([]byte("L"), 1<<20)
	mux := http.NewServeMux()
	mux.HandleFunc("/small", func(w http.ResponseWriter, _ *http.Request) { w.Write(small) })
	mux.HandleFunc("/large", func(w http.ResponseWriter, _ *http.Request) { w.Write(large) })
	static := &tls.Config{Certificates: []tls.Certificate{p.srv}, MinVersion: tls.VersionTLS13}

	plain := benchListen(b)
	go (&http.Server{Handler: mux}).Serve(plain)
	direct := benchListen(b)
	go (&http.Server{Handler: mux}).Serve(tls.NewListener(direct, static))

	floor := benchListen(b)
	target, _ := url.Parse("http://" + plain.Addr().String())
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 64}
	go (&http.Server{Handler: rp}).Serve(tls.NewListener(floor, static))

	r := reloader(b, file.WithKeyPair(p.path("tls.crt"), p.path("tls.key")))
	rows := []proxyBench{{"direct", "https://" + direct.Addr().String()}, {"floor", "https://" + floor.Addr().String()}}
	for _, mode := range []proxy.Mode{proxy.ModeHTTP, proxy.ModeTCP} {
		s, err := proxy.NewServer(proxy.Target{Network: "tcp", Address: plain.Addr().String()}, []hotcert.Provider{r}, proxy.WithMode(mode))
		if err != nil {
			b.Fatal(err)
		}
		ln := benchListen(b)
		go s.Serve(ln)
		b.Cleanup(func() { s.Shutdown(context.Background()) })
		rows = append(rows, proxyBench{"hotcert-" + string(mode), "https://" + ln.Addr().String()})
	}
	if bin := os.Getenv("GHOSTUNNEL"); bin != "" {
		ln := benchListen(b)
		addr := ln.Addr().String()
		ln.Close()
		combined := filepath.Join(b.TempDir(), "server.pem")
		crt, _ := os.ReadFile(p.path("tls.crt"))
		key, _ := os.ReadFile(p.path("tls.key"))
		os.WriteFile(combined, append(crt, key...), 0o600)
		cmd := exec.Command(bin, "server", "--listen", addr, "--target", plain.Addr().String(), "--keystore", combined,
			"--cacert", p.path("ca.crt"), "--disable-authentication", "--quiet=all")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		waitDial(b, addr)
		rows = append(rows, proxyBench{"ghostunnel", "https://" + addr})
	}
	// Not a way through: the backend's plaintext port itself, the hop every
	// HTTP-terminating proxy adds (its p50 over direct's says what that hop
	// costs on this machine).
	return append(rows, proxyBench{"plain-hop", "http://" + plain.Addr().String()})
}

func benchListen(b *testing.B) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	return ln
}

func waitDial(b *testing.B, addr string) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
	}
	b.Fatalf("nothing listens on %s", addr)
}

// BenchmarkProxy: HTTP/1.1 requests over TLS 1.3 to one backend, directly and
// through each proxy, rows interleaved request by request so that they share the
// machine's state: small (64-byte) and large (1 MiB) responses on a kept-alive
// connection, and many short connections (a full handshake per request). Per row:
// p50 and p99 latency and throughput; ratios of each proxy's p50 and throughput to
// direct TLS and to the floor (a static-config httputil reverse proxy).
func BenchmarkProxy(b *testing.B) {
	p := newPKI(b)
	rows := proxyRows(b, p)
	for _, sc := range []struct {
		name, path string
		short      bool
	}{{"small", "/small", false}, {"large", "/large", false}, {"short-conns", "/small", true}} {
		b.Run(sc.name, func(b *testing.B) {
			clients := make([]*http.Client, len(rows))
			for i := range rows {
				tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.pool(), ServerName: "localhost", ClientSessionCache: nil},
					DisableKeepAlives: sc.short, MaxIdleConnsPerHost: 1}
				clients[i] = &http.Client{Transport: tr}
				b.Cleanup(tr.CloseIdleConnections)
			}
			lat := make([][]time.Duration, len(rows))
			var bytesRead int64
			do := func(i int) {
				start := time.Now()
				resp, err := clients[i].Get(rows[i].url + sc.path)
				if err != nil {
					b.Fatalf("%s: %v", rows[i].name, err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil {
					b.Fatalf("%s: %v", rows[i].name, err)
				}
				lat[i] = append(lat[i], time.Since(start))
				bytesRead += n
			}
			for i := range rows { // warm: connections open, pools filled
				do(i)
				lat[i] = lat[i][:0]
			}
			b.ResetTimer()
			for range b.N {
				for i := range rows {
					do(i)
				}
			}
			b.StopTimer()
			p50 := make([]float64, len(rows))
			for i, r := range rows {
				l := slices.Clone(lat[i])
				slices.Sort(l)
				p50[i] = float64(l[len(l)/2])
				var sum time.Duration
				for _, d := range l {
					sum += d
				}
				b.ReportMetric(p50[i]/1e3, r.name+"-p50-µs")
				b.ReportMetric(float64(l[len(l)*99/100])/1e3, r.name+"-p99-µs")
				b.ReportMetric(float64(len(l))/sum.Seconds(), r.name+"-req/s")
			}
			for i, r := range rows[2:] {
				b.ReportMetric(p50[i+2]/p50[0], r.name+"/direct-p50")
				b.ReportMetric(p50[i+2]/p50[1], r.name+"/floor-p50")
			}
			b.ReportMetric(p50[1]/p50[0], "floor/direct-p50")
			_ = bytesRead
		})
	}
}

// BenchmarkProxyIdleConnMemory: the heap and stacks an idle client connection
// costs through each proxy beyond what it costs directly (the client's and the
// backend's own share cancel out), with 200 idle TLS connections per row.
func BenchmarkProxyIdleConnMemory(b *testing.B) {
	p := newPKI(b)
	rows := proxyRows(b, p)
	const conns = 200
	inuse := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapInuse + ms.StackInuse)
	}
	per := map[string]float64{}
	for range b.N {
		for _, r := range rows {
			if r.name == "ghostunnel" || r.name == "plain-hop" {
				continue // another process (its memory is not this one's); not TLS
			}
			addr := strings.TrimPrefix(r.url, "https://")
			time.Sleep(100 * time.Millisecond) // the previous row's connections gone
			before := inuse()
			var open []*tls.Conn
			for range conns {
				c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: p.pool(), ServerName: "localhost"})
				if err != nil {
					b.Fatal(err)
				}
				// One request each, so that a proxy has its backend side open too.
				fmt.Fprintf(c, "GET /small HTTP/1.1\r\nHost: localhost\r\n\r\n")
				resp, err := http.ReadResponse(bufioReader(c), nil)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				open = append(open, c)
			}
			time.Sleep(100 * time.Millisecond) // let the servers park their goroutines
			per[r.name] += float64(inuse()-before) / conns
			for _, c := range open {
				c.Close()
			}
		}
	}
	for _, r := range rows {
		if v, ok := per[r.name]; ok && r.name != "direct" {
			b.ReportMetric((v-per["direct"])/float64(b.N), r.name+"-B/idle-conn")
		}
	}
	b.ReportMetric(per["direct"]/float64(b.N), "direct-B/idle-conn")
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }
