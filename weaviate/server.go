package weaviate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// This file starts Weaviate servers on the loopback interface, one
// process per node: the integration tests and `xmr bench weaviate` use
// it. A production cluster is deployed with Weaviate's own tools
// (docs/weaviate.md).

// ServerVersion is the Weaviate release xmr is tested against, and
// InstallCommand the command that installs its server.
const (
	ServerVersion  = "v1.35.2"
	InstallCommand = "go install github.com/weaviate/weaviate/cmd/weaviate-server@" + ServerVersion
)

// ErrNoServer is wrapped by FindServer's error when no weaviate-server
// binary is found.
var ErrNoServer = errors.New("no weaviate-server binary")

// FindServer returns the path of the weaviate-server binary: $XMR_WEAVIATE
// if set, else weaviate-server on $PATH, else in $GOBIN or $GOPATH/bin
// (where InstallCommand puts it; GOPATH defaults to ~/go).
func FindServer() (string, error) {
	if p := os.Getenv("XMR_WEAVIATE"); p != "" {
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			return "", fmt.Errorf("$XMR_WEAVIATE=%s is not a file: %w", p, ErrNoServer)
		}
		return p, nil
	}
	if p, err := exec.LookPath("weaviate-server"); err == nil {
		return p, nil
	}
	var dirs []string
	if d := os.Getenv("GOBIN"); d != "" {
		dirs = append(dirs, d)
	}
	if d := os.Getenv("GOPATH"); d != "" {
		for _, p := range filepath.SplitList(d) {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	} else if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "weaviate-server")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w on $PATH, $GOBIN or $GOPATH/bin (install it with %s, or set $XMR_WEAVIATE)", ErrNoServer, InstallCommand)
}

// ClusterOptions describe a loopback cluster.
type ClusterOptions struct {
	// Binary is the weaviate-server to run ("": FindServer).
	Binary string
	// Nodes is the number of nodes (0: 1).
	Nodes int
	// Dir holds the nodes' data and logs (node-N/, node-N.log).
	Dir string
	// Env adds environment variables to every node (e.g. ASYNC_INDEXING=true).
	Env []string
	// Ready bounds the wait for every node to answer (0: 2 minutes).
	Ready time.Duration
}

// Node is one running server of a Cluster.
type Node struct {
	Name string
	URL  string // REST address, http://127.0.0.1:PORT
	Log  string // its log file
	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

// Cluster is a set of Weaviate servers on loopback ports picked at run
// time.
type Cluster struct {
	Nodes []*Node
}

// StartCluster starts the nodes of a loopback cluster and waits until
// every node answers and the cluster has all its members. On error it
// stops what it started.
func StartCluster(ctx context.Context, o ClusterOptions) (*Cluster, error) {
	bin := o.Binary
	if bin == "" {
		var err error
		if bin, err = FindServer(); err != nil {
			return nil, err
		}
	}
	n := max(o.Nodes, 1)
	ready := o.Ready
	if ready == 0 {
		ready = 2 * time.Minute
	}
	// Per node: REST, gRPC, gossip+data (a pair), raft+internal RPC (a pair).
	type ports struct{ rest, grpc, gossip, raft int }
	ps := make([]ports, n)
	var holds []net.Listener
	defer func() {
		for _, l := range holds {
			l.Close()
		}
	}()
	for i := range ps {
		var err error
		var ls []net.Listener
		if ps[i].rest, ls, err = freePorts(1); err == nil {
			holds = append(holds, ls...)
			ps[i].grpc, ls, err = freePorts(1)
		}
		if err == nil {
			holds = append(holds, ls...)
			ps[i].gossip, ls, err = freePorts(2)
		}
		if err == nil {
			holds = append(holds, ls...)
			ps[i].raft, ls, err = freePorts(2)
		}
		if err != nil {
			return nil, fmt.Errorf("weaviate cluster: pick ports: %w", err)
		}
		holds = append(holds, ls...)
	}
	var join []string
	for i := range ps {
		join = append(join, fmt.Sprintf("node%d:%d", i, ps[i].raft))
	}
	for _, l := range holds {
		l.Close()
	}
	holds = nil
	c := &Cluster{}
	for i, p := range ps {
		name := fmt.Sprintf("node%d", i)
		data := filepath.Join(o.Dir, name)
		if err := os.MkdirAll(data, 0o755); err != nil {
			c.Stop()
			return nil, err
		}
		logPath := filepath.Join(o.Dir, name+".log")
		logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			c.Stop()
			return nil, err
		}
		env := append(os.Environ(),
			"AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED=true",
			"DEFAULT_VECTORIZER_MODULE=none",
			"ENABLE_MODULES=",
			"DISABLE_TELEMETRY=true",
			"GO_PROFILING_DISABLE=true",
			"PROMETHEUS_MONITORING_ENABLED=false",
			"LOG_LEVEL=warning",
			"QUERY_DEFAULTS_LIMIT=25",
			"PERSISTENCE_DATA_PATH="+data,
			"GRPC_PORT="+strconv.Itoa(p.grpc),
			"CLUSTER_HOSTNAME="+name,
			"CLUSTER_IN_LOCALHOST=true",
			"CLUSTER_BIND_ADDR=127.0.0.1",
			"CLUSTER_ADVERTISE_ADDR=127.0.0.1",
			"CLUSTER_GOSSIP_BIND_PORT="+strconv.Itoa(p.gossip),
			"CLUSTER_DATA_BIND_PORT="+strconv.Itoa(p.gossip+1),
			"RAFT_PORT="+strconv.Itoa(p.raft),
			"RAFT_INTERNAL_RPC_PORT="+strconv.Itoa(p.raft+1),
			"RAFT_JOIN="+strings.Join(join, ","),
			"RAFT_BOOTSTRAP_EXPECT="+strconv.Itoa(n),
		)
		if i > 0 {
			env = append(env, fmt.Sprintf("CLUSTER_JOIN=127.0.0.1:%d", ps[0].gossip))
		}
		env = append(env, o.Env...)
		cmd := exec.Command(bin, "--host", "127.0.0.1", "--port", strconv.Itoa(p.rest), "--scheme", "http",
			"--read-timeout", "600s", "--write-timeout", "600s")
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			logf.Close()
			c.Stop()
			return nil, fmt.Errorf("weaviate cluster: start %s: %w", bin, err)
		}
		nd := &Node{Name: name, URL: fmt.Sprintf("http://127.0.0.1:%d", p.rest), Log: logPath, cmd: cmd, done: make(chan struct{})}
		go func() {
			cmd.Wait()
			logf.Close()
			close(nd.done)
		}()
		c.Nodes = append(c.Nodes, nd)
		if i == 0 && n > 1 {
			// The others join through node0's gossip port: wait for it, or
			// they give up joining.
			if err := waitPort(ctx, nd, p.gossip, ready); err != nil {
				c.Stop()
				return nil, fmt.Errorf("%w\n%s", err, tail(nd.Log))
			}
		}
	}
	rctx, cancel := context.WithTimeout(ctx, ready)
	defer cancel()
	for _, nd := range c.Nodes {
		if err := c.waitNode(rctx, nd, n); err != nil {
			c.Stop()
			var logs []string
			for _, x := range c.Nodes {
				logs = append(logs, fmt.Sprintf("--- %s (%s):\n%s", x.Name, x.Log, tail(x.Log)))
			}
			return nil, fmt.Errorf("%w\n%s", err, strings.Join(logs, "\n"))
		}
	}
	return c, nil
}

// waitNode waits until nd answers and sees n healthy nodes.
func (c *Cluster) waitNode(ctx context.Context, nd *Node, n int) error {
	cl, err := NewClient(nd.URL)
	if err != nil {
		return err
	}
	var last error
	for {
		select {
		case <-nd.done:
			return fmt.Errorf("weaviate %s exited during start", nd.Name)
		default:
		}
		var nodes struct {
			Nodes []struct {
				Name   string `json:"name"`
				Status string `json:"status"`
			} `json:"nodes"`
		}
		if last = cl.Ready(ctx); last == nil {
			if last = cl.do(ctx, "GET", "/v1/nodes", nil, &nodes); last == nil {
				healthy := 0
				for _, x := range nodes.Nodes {
					if x.Status == "HEALTHY" {
						healthy++
					}
				}
				if healthy >= n {
					return nil
				}
				last = fmt.Errorf("%d of %d nodes healthy", healthy, n)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("weaviate %s is not ready: %w (last: %v)", nd.Name, ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// waitPort waits until nd accepts TCP connections on port.
func waitPort(ctx context.Context, nd *Node, port int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-nd.done:
			return fmt.Errorf("weaviate %s exited during start", nd.Name)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("weaviate %s: gossip port %d not open after %v", nd.Name, port, limit)
		}
	}
}

// StopNode stops node i (SIGTERM, then SIGKILL after 10 s) and waits for
// it to exit.
func (c *Cluster) StopNode(i int) {
	nd := c.Nodes[i]
	nd.once.Do(func() {
		if nd.cmd.Process == nil {
			return
		}
		syscall.Kill(-nd.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-nd.done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-nd.cmd.Process.Pid, syscall.SIGKILL)
			<-nd.done
		}
	})
}

// Stop stops every node.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for i := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.StopNode(i)
		}()
	}
	wg.Wait()
}

// freePorts returns the first of k consecutive free TCP ports on
// loopback, with listeners that hold them until closed.
func freePorts(k int) (int, []net.Listener, error) {
	for try := 0; try < 100; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, nil, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		ls := []net.Listener{l}
		ok := true
		for j := 1; j < k; j++ {
			lj, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+j))
			if err != nil {
				ok = false
				break
			}
			ls = append(ls, lj)
		}
		// The gossip port is also a UDP port.
		if ok {
			u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
			} else {
				u.Close()
			}
		}
		if ok {
			return p, ls, nil
		}
		for _, x := range ls {
			x.Close()
		}
	}
	return 0, nil, fmt.Errorf("no %d consecutive free ports found", k)
}

// tail returns the last lines of a log file.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
