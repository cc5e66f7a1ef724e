package console

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
)

const clusterUsage = `
usage: tollgate cluster [-t TOPIC]... [flags]

The cluster's metadata, as kcat -L prints it: the cluster id, the brokers
(id, host:port, rack, which is the controller) and every topic with its
partitions' leaders, replicas and in-sync replicas (-t: only these topics).

  tollgate cluster
  tollgate cluster -t orders -t payments
  tollgate metadata --format json                   # the same command

Exit codes: 0 done, 1 the cluster refused (unknown topic, denied, ...), 2 usage, 3 unreachable.`

// ClusterDescription is `tollgate cluster` output.
type ClusterDescription struct {
	ClusterID  string          `json:"cluster_id"`
	Controller int32           `json:"controller"`
	Brokers    []ClusterBroker `json:"brokers"`
	Topics     []ClusterTopic  `json:"topics"`
}

// ClusterBroker is one broker of a ClusterDescription.
type ClusterBroker struct {
	ID         int32  `json:"id"`
	Host       string `json:"host"`
	Port       int32  `json:"port"`
	Rack       string `json:"rack,omitempty"`
	Controller bool   `json:"controller"`
}

// ClusterTopic is one topic of a ClusterDescription.
type ClusterTopic struct {
	Name       string             `json:"name"`
	ID         string             `json:"id"`
	Internal   bool               `json:"internal"`
	Partitions []ClusterPartition `json:"partitions"`
}

// ClusterPartition is one partition of a ClusterTopic.
type ClusterPartition struct {
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	Epoch     int32   `json:"leader_epoch"`
	Replicas  []int32 `json:"replicas"`
	ISR       []int32 `json:"isr"`
	Offline   []int32 `json:"offline_replicas"`
	Error     string  `json:"error,omitempty"`
}

// Cluster is `tollgate cluster` (also `tollgate metadata`).
func Cluster(ctx context.Context, args []string, std IO) int {
	var c common
	var topics stringList
	fs := newFlagSet("cluster", clusterUsage, std.Err)
	c.register(fs)
	fs.Var(&topics, "t", "only this topic (repeatable)")
	fs.Var(&topics, "topic", "only this topic (repeatable)")
	pos, err := parseArgs(fs, args)
	if err == nil {
		err = c.check(std)
	}
	if err == nil && len(pos) > 0 {
		err = usagef("cluster takes no arguments (name topics with -t)")
	}
	if err == nil {
		err = runCluster(ctx, &c, topics, std)
	}
	return finish(std.Err, "cluster", err)
}

func runCluster(ctx context.Context, c *common, topics []string, std IO) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	adm, err := c.admin(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	m, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	d := ClusterDescription{ClusterID: m.Cluster, Controller: m.Controller, Brokers: []ClusterBroker{}, Topics: []ClusterTopic{}}
	for _, b := range m.Brokers {
		cb := ClusterBroker{ID: b.NodeID, Host: b.Host, Port: b.Port, Controller: b.NodeID == m.Controller}
		if b.Rack != nil {
			cb.Rack = *b.Rack
		}
		d.Brokers = append(d.Brokers, cb)
	}
	for _, td := range m.Topics.Sorted() {
		if td.Err != nil {
			return topicErr(td.Topic, td.Err)
		}
		ct := ClusterTopic{Name: td.Topic, ID: topicID(td.ID), Internal: td.IsInternal, Partitions: []ClusterPartition{}}
		for _, p := range td.Partitions.Sorted() {
			cp := ClusterPartition{Partition: p.Partition, Leader: p.Leader, Epoch: p.LeaderEpoch,
				Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR), Offline: nonNil(p.OfflineReplicas)}
			if p.Err != nil {
				cp.Error = p.Err.Error()
			}
			ct.Partitions = append(ct.Partitions, cp)
		}
		d.Topics = append(d.Topics, ct)
	}
	return c.emit(std.Out, d, func(w io.Writer) error { return writeCluster(w, d) })
}

// writeCluster is the text form: a line for the cluster, a table of
// brokers, a table of partitions.
func writeCluster(w io.Writer, d ClusterDescription) error {
	fmt.Fprintf(w, "Cluster: %s  Controller: %d  Brokers: %d  Topics: %d\n\n", d.ClusterID, d.Controller, len(d.Brokers), len(d.Topics))
	bt := newTable("BROKER", "ADDRESS", "RACK", "CONTROLLER")
	for _, b := range d.Brokers {
		ctl := ""
		if b.Controller {
			ctl = "yes"
		}
		bt.row(b.ID, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), b.Rack, ctl)
	}
	if err := bt.write(w); err != nil {
		return err
	}
	if len(d.Topics) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	// OFFLINE and ERROR only when some partition has one.
	offline, errs := false, false
	for _, t := range d.Topics {
		for _, p := range t.Partitions {
			offline, errs = offline || len(p.Offline) > 0, errs || p.Error != ""
		}
	}
	cols := []string{"TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR"}
	if offline {
		cols = append(cols, "OFFLINE")
	}
	if errs {
		cols = append(cols, "ERROR")
	}
	pt := newTable(cols...)
	for _, t := range d.Topics {
		for _, p := range t.Partitions {
			cells := []any{t.Name, p.Partition, p.Leader, p.Epoch, joinInts(p.Replicas), joinInts(p.ISR)}
			if offline {
				cells = append(cells, joinInts(p.Offline))
			}
			if errs {
				cells = append(cells, p.Error)
			}
			pt.row(cells...)
		}
	}
	return pt.write(w)
}
