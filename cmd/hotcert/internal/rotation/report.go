package rotation

import (
	"time"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
)

// Step names: the three steps of a CA rotation with a union bundle, in order. They
// are a documented contract (docs/rotation.md), as is the JSON of a Report.
const (
	// StepAddNewCA adds the new CA to every agent's bundle. Always safe; done once
	// every connected agent of every replica reports trusting the new CA.
	StepAddNewCA = "add-new-ca"
	// StepSwitchServerCert switches every replica to a leaf issued by the new CA. Safe
	// once StepAddNewCA is done; done once every replica serves such a leaf.
	StepSwitchServerCert = "switch-server-cert"
	// StepRemoveOldCA removes the old CA from the agents' bundles. Safe once both
	// steps before it are done; done once no connected agent trusts the old CA.
	StepRemoveOldCA = "remove-old-ca"
)

// WaitComplete is what Wait can wait for besides a step: the end of the rotation,
// every step done (`hotcert rotation status --wait complete`).
const WaitComplete = "complete"

// Steps lists the step names in order.
func Steps() []string { return []string{StepAddNewCA, StepSwitchServerCert, StepRemoveOldCA} }

// Report says where a CA rotation stands.
type Report struct {
	OldCA CA `json:"old_ca"`
	NewCA CA `json:"new_ca"`
	// Replicas is what each replica serves and how many agents it reports.
	Replicas []ReplicaReport `json:"replicas"`
	// Agents counts the connected agents of the replicas that report.
	Agents AgentCounts `json:"agents"`
	// Steps holds the verdict of each step, in order.
	Steps []Step `json:"steps"`
	// Next is the first step not done ("" once the rotation is complete).
	Next string `json:"next"`
	// Stragglers are the agents and replicas that hold a step back.
	Stragglers []Straggler `json:"stragglers"`
	// Summary is where the rotation stands, in one sentence.
	Summary   string    `json:"summary"`
	CheckedAt time.Time `json:"checked_at"`
}

// CA names one side of the rotation.
type CA struct {
	// Name is the first CA's common name (its subject without one).
	Name string `json:"name"`
	File string `json:"file"`
	// SHA256 are the fingerprints (lower-case hex) of the CAs of the file.
	SHA256 []string `json:"sha256"`
}

// ReplicaReport is what one replica serves and reports.
type ReplicaReport struct {
	// Name is the replica's name from its status (its address when unknown).
	Name      string `json:"name"`
	Address   string `json:"address"`
	StatusURL string `json:"status_url"`
	// Serves is the leaf a new handshake gets (nil when the handshake failed:
	// ServeError says why).
	Serves     *ServedLeaf `json:"serves,omitempty"`
	ServeError string      `json:"serve_error,omitempty"`
	// Agents counts its connected agents (0 when its status could not be read:
	// StatusError says why).
	Agents      int    `json:"agents"`
	StatusError string `json:"status_error,omitempty"`
	// Departed counts the agents it lists as departed (its stream closed, not back).
	Departed int `json:"departed"`

	fleet *agentrpc.Fleet
}

// ServedLeaf is the leaf a replica serves.
type ServedLeaf struct {
	// SHA256 is in openssl's colon format, as `hotcert inspect` prints it.
	SHA256   string    `json:"sha256"`
	Serial   string    `json:"serial"`
	Subject  string    `json:"subject"`
	Issuer   string    `json:"issuer"`
	NotAfter time.Time `json:"not_after"`
	// IssuedByOld and IssuedByNew say which CA verifies the served chain.
	IssuedByOld bool `json:"issued_by_old"`
	IssuedByNew bool `json:"issued_by_new"`
	// HostnameOK says whether the leaf names the server name.
	HostnameOK bool `json:"hostname_ok"`
}

// AgentCounts counts the connected agents of the replicas that report, and the
// departed ones.
type AgentCounts struct {
	Total    int `json:"total"`
	TrustNew int `json:"trust_new"`
	TrustOld int `json:"trust_old"`
	// Unknown reported nothing: an older release, which reads its bundle only at start.
	Unknown int `json:"unknown"`
	// AtStart reported a bundle it reads only at start.
	AtStart int `json:"at_start"`
	// Departed counts the agents whose stream closed and that have not come back to
	// any replica, within the time the replicas remember them (not counted in
	// Total): each holds step 1 back, named, as not proven.
	Departed int `json:"departed"`
}

// Step is the verdict on one step.
type Step struct {
	Name string `json:"name"`
	// Safe says whether the step can be taken now without failing a handshake.
	Safe bool `json:"safe"`
	// Done says whether its effect is seen everywhere.
	Done bool `json:"done"`
	// Why says why, naming the stragglers.
	Why string `json:"why"`
}

// Straggler is an agent or a replica that holds a step back.
type Straggler struct {
	// Kind is "agent" or "replica".
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Replica is the replica an agent is connected to.
	Replica string `json:"replica,omitempty"`
	// Step is the step it holds back (the one it keeps from being done).
	Step   string `json:"step"`
	Reason string `json:"reason"`
	// LastSeen is when a departed agent's stream closed (departed agents only).
	LastSeen *time.Time `json:"last_seen,omitempty"`
}

// Step returns the verdict of the named step, and false for an unknown name.
func (r *Report) Step(name string) (Step, bool) {
	for _, s := range r.Steps {
		if s.Name == name {
			return s, true
		}
	}
	return Step{}, false
}
