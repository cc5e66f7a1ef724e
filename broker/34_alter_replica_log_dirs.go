package broker

import (
	"path/filepath"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterReplicaLogDirs: v0-2
//
// Behavior:
// * There is one log dir, the data directory as an absolute path (what
//   DescribeLogDirs reports), and every partition is in it, so moving a
//   replica to it is done already: NONE, nothing moves. As Kafka's
//   ReplicaManager.alterReplicaLogDirs, per partition and in this order:
//   a topic name too long for Kafka's future-log dir name (over 255 bytes)
//   is INVALID_TOPIC_EXCEPTION; any other dir LOG_DIR_NOT_FOUND (Kafka's
//   LogManager.isLogDirOnline compares absolute paths exactly); an unknown
//   topic or partition UNKNOWN_TOPIC_OR_PARTITION.
// * A partition named more than once (in one dir or several) is answered
//   once, for the last dir naming it, as Kafka's request map; results are
//   grouped by topic in the order topics first appear.
//
// Version notes:
// * v1: throttle after response
// * v2: flexible

func init() { regKey(int16(kmsg.AlterReplicaLogDirs), 0, 2, syncHandler(handleAlterReplicaLogDirs)) }

// logDir is the broker's one log dir: the data directory, absolute.
func (b *Broker) logDir() string {
	if abs, err := filepath.Abs(b.cfg.DataDir); err == nil {
		return abs
	}
	return b.cfg.DataDir
}

func handleAlterReplicaLogDirs(c *Conn, req *kmsg.AlterReplicaLogDirsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	type tp struct {
		topic string
		p     int32
	}
	dirOf := map[tp]string{}
	var topics []string
	parts := map[string][]int32{}
	for _, d := range req.Dirs {
		for _, t := range d.Topics {
			for _, p := range t.Partitions {
				k := tp{t.Topic, p}
				if _, seen := dirOf[k]; !seen {
					if _, ok := parts[t.Topic]; !ok {
						topics = append(topics, t.Topic)
					}
					parts[t.Topic] = append(parts[t.Topic], p)
				}
				dirOf[k] = d.Dir
			}
		}
	}
	ours := c.b.logDir()
	for _, name := range topics {
		rt := kmsg.NewAlterReplicaLogDirsResponseTopic()
		rt.Topic = name
		top := c.b.lookup(name)
		for _, p := range parts[name] {
			rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
			rp.Partition = p
			switch {
			case len(futureDirName(name, p)) > 255:
				rp.ErrorCode = kerr.InvalidTopicException.Code
			case dirOf[tp{name, p}] != ours:
				rp.ErrorCode = kerr.LogDirNotFound.Code
			case top == nil || c.b.partitionOf(top, p) == nil:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// futureDirName is the name Kafka gives a replica's log while it moves
// between dirs (UnifiedLog.logFutureDirName): topic-partition, a dot, a
// 32-hex-digit id and "-future".
func futureDirName(topic string, p int32) string {
	return topic + "-" + strconv.Itoa(int(p)) + ".00000000000000000000000000000000-future"
}
