package chaos

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os/exec"
	"strings"
)

// Net is a network of Linux network namespaces on this machine, one per
// member (a NATS node and the services attached to it), each joined by a
// veth pair to a bridge in the root namespace that holds the gateway
// address. Cut takes a member's bridge-side link down: a partition, the
// member's processes keep running and see nothing but silence. Names
// carry a random id, so parallel runs do not collide. Requires root and
// iproute2's ip.
type Net struct {
	ID      string
	Subnet  string // a /24 of 10.0.0.0/8 no interface of this machine uses
	Gateway string // the bridge's address: the root namespace's processes
	Bridge  string
	Members []Member
	created []func() error
}

// Member is one namespace of a Net.
type Member struct {
	Netns string
	// Veth is the bridge-side end of its pair (what Cut takes down).
	Veth string
	// Addr is its address on the bridge; its own loopback also works inside.
	Addr string
}

func ipCmd(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// NewNet creates a bridge and n namespaces; on error it removes what it
// made. Close removes everything (call it from t.Cleanup right away).
func NewNet(n int) (*Net, error) {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	id := hex.EncodeToString(b)[:5]
	subnet, err := freeSubnet()
	if err != nil {
		return nil, err
	}
	x := &Net{ID: id, Subnet: subnet + ".0/24", Gateway: subnet + ".1", Bridge: "mcb" + id}
	fail := func(err error) (*Net, error) { return nil, errors.Join(err, x.Close()) }
	if err := ipCmd("link", "add", x.Bridge, "type", "bridge"); err != nil {
		return fail(err)
	}
	x.created = append(x.created, func() error { return ipCmd("link", "del", x.Bridge) })
	for _, args := range [][]string{{"addr", "add", x.Gateway + "/24", "dev", x.Bridge}, {"link", "set", x.Bridge, "up"}} {
		if err := ipCmd(args...); err != nil {
			return fail(err)
		}
	}
	for i := range n {
		m := Member{Netns: fmt.Sprintf("mcpbus-%s-n%d", id, i+1), Veth: fmt.Sprintf("mcv%sn%d", id, i+1),
			Addr: fmt.Sprintf("%s.%d", subnet, 11+i)}
		peer := m.Veth + "p"
		if err := ipCmd("netns", "add", m.Netns); err != nil {
			return fail(err)
		}
		// Deleting the namespace deletes the peer end and with it the pair.
		x.created = append(x.created, func() error { return ipCmd("netns", "del", m.Netns) })
		for _, args := range [][]string{
			{"link", "add", m.Veth, "type", "veth", "peer", "name", peer},
			{"link", "set", peer, "netns", m.Netns},
			{"link", "set", m.Veth, "master", x.Bridge},
			{"link", "set", m.Veth, "up"},
			{"-n", m.Netns, "addr", "add", m.Addr + "/24", "dev", peer},
			{"-n", m.Netns, "link", "set", peer, "up"},
			{"-n", m.Netns, "link", "set", "lo", "up"},
		} {
			if err := ipCmd(args...); err != nil {
				return fail(err)
			}
		}
		x.Members = append(x.Members, m)
	}
	return x, nil
}

// freeSubnet picks 10.a.b (a /24) that no address of this machine is in.
func freeSubnet() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	for range 50 {
		a, err := rand.Int(rand.Reader, big.NewInt(100))
		if err != nil {
			return "", err
		}
		c, err := rand.Int(rand.Reader, big.NewInt(250))
		if err != nil {
			return "", err
		}
		prefix := fmt.Sprintf("10.%d.%d", 100+a.Int64(), 1+c.Int64())
		taken := false
		for _, ad := range addrs {
			if ipn, ok := ad.(*net.IPNet); ok && strings.HasPrefix(ipn.IP.String(), prefix+".") {
				taken = true
			}
		}
		if !taken {
			return prefix, nil
		}
	}
	return "", errors.New("no free 10.x.y.0/24 subnet found")
}

// Run makes p run inside member i's namespace (ip netns exec replaces
// itself with the command, so p's pid and process group are the command's).
func (x *Net) Run(i int, p *Proc) {
	p.Args = append([]string{"netns", "exec", x.Members[i].Netns, p.Bin}, p.Args...)
	p.Bin = "ip"
}

// Cut partitions member i from the others and the root namespace.
func (x *Net) Cut(i int) error { return ipCmd("link", "set", x.Members[i].Veth, "down") }

// Heal joins member i again.
func (x *Net) Heal(i int) error { return ipCmd("link", "set", x.Members[i].Veth, "up") }

// Close removes the namespaces and the bridge (idempotent).
func (x *Net) Close() error {
	var errs []error
	for i := len(x.created) - 1; i >= 0; i-- {
		errs = append(errs, x.created[i]())
	}
	x.created = nil
	return errors.Join(errs...)
}
