package broker

import (
	"syscall"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeLogDirs: v0-5
//
// Behavior:
// * One log dir, the data directory (absolute path), holding every
//   partition; Size is the partition's bytes on disk, OffsetLag 0,
//   IsFuture false.
// * Topics null: every topic; otherwise only the named ones that exist
//   (unknown topics and partitions are left out, as Kafka does).
//
// Version notes:
// * v1: throttle after response; v2: flexible; v3: top-level ErrorCode
// * v4: TotalBytes, UsableBytes (statfs of the data dir)
// * v5: IsCordoned (never)

func init() { regKey(int16(kmsg.DescribeLogDirs), 0, 5, syncHandler(handleDescribeLogDirs)) }

func handleDescribeLogDirs(c *Conn, req *kmsg.DescribeLogDirsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = c.b.logDir()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir.Dir, &st); err == nil {
		dir.TotalBytes = int64(st.Blocks) * int64(st.Bsize)
		dir.UsableBytes = int64(st.Bavail) * int64(st.Bsize)
	} else {
		dir.TotalBytes, dir.UsableBytes = -1, -1
	}
	add := func(t *topic, parts []int32) {
		dt := kmsg.NewDescribeLogDirsResponseDirTopic()
		dt.Topic = t.name
		for _, i := range parts {
			p := c.b.partitionOf(t, i)
			if p == nil {
				continue
			}
			dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			dp.Partition, dp.Size = i, p.log.Size()
			dt.Partitions = append(dt.Partitions, dp)
		}
		dir.Topics = append(dir.Topics, dt)
	}
	if req.Topics == nil {
		for _, t := range c.b.sortedTopics() {
			n := c.b.partitionCount(t)
			parts := make([]int32, n)
			for i := range parts {
				parts[i] = int32(i)
			}
			add(t, parts)
		}
	} else {
		for _, rt := range req.Topics {
			if t := c.b.lookup(rt.Topic); t != nil {
				add(t, rt.Partitions)
			}
		}
	}
	resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
	return resp, nil
}
