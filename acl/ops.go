package acl

import "github.com/tollgate-kafka/tollgate/apis"

// need is what one API key requires of the principal, per resource unit
// of a request (policy.Resource): the operation on the unit's
// transactional id, group and topic, on the cluster for every unit, and
// on the cluster for a unit that names nothing else (a broker config
// resource, a request without resources). Zero means not checked. The
// facts are KafkaApis' authorize calls (and the KRaft controller's for
// the controller keys); keys not in the table are inter-broker or
// controller RPCs, which need CLUSTER_ACTION on the cluster.
type need struct {
	cluster, txn, group, topic Operation
	bare                       Operation
	// topicOnCluster: the topic operation is also granted on the cluster
	// (CreateTopics: CREATE on the cluster or on the topic).
	topicOnCluster bool
	// idempotent: without a transactional id, IDEMPOTENT_WRITE on the
	// cluster or WRITE on any topic (InitProducerId, KIP-679).
	idempotent bool
	// open: no ACL is checked (the key lists what the principal may see,
	// or is needed before anything else).
	open bool
}

var needs = map[int16]need{
	apis.Produce:                      {txn: OpWrite, topic: OpWrite},
	apis.Fetch:                        {topic: OpRead},
	apis.ListOffsets:                  {topic: OpDescribe},
	apis.Metadata:                     {topic: OpDescribe},
	apis.OffsetCommit:                 {group: OpRead, topic: OpRead},
	apis.OffsetFetch:                  {group: OpDescribe, topic: OpDescribe},
	apis.FindCoordinator:              {group: OpDescribe, txn: OpDescribe},
	apis.JoinGroup:                    {group: OpRead},
	apis.Heartbeat:                    {group: OpRead},
	apis.LeaveGroup:                   {group: OpRead},
	apis.SyncGroup:                    {group: OpRead},
	apis.DescribeGroups:               {group: OpDescribe},
	apis.ListGroups:                   {}, // the answer lists the groups the principal may describe (policy/authz.go)
	apis.SASLHandshake:                {open: true},
	apis.ApiVersions:                  {open: true},
	apis.SASLAuthenticate:             {open: true},
	apis.CreateTopics:                 {topic: OpCreate, topicOnCluster: true},
	apis.DeleteTopics:                 {topic: OpDelete},
	apis.DeleteRecords:                {topic: OpDelete},
	apis.InitProducerID:               {txn: OpWrite, idempotent: true},
	apis.OffsetForLeaderEpoch:         {topic: OpDescribe},
	apis.AddPartitionsToTxn:           {txn: OpWrite, topic: OpWrite},
	apis.AddOffsetsToTxn:              {txn: OpWrite, group: OpRead},
	apis.EndTxn:                       {txn: OpWrite},
	apis.TxnOffsetCommit:              {txn: OpWrite, group: OpRead, topic: OpRead},
	apis.DescribeACLs:                 {cluster: OpDescribe},
	apis.CreateACLs:                   {cluster: OpAlter},
	apis.DeleteACLs:                   {cluster: OpAlter},
	apis.DescribeConfigs:              {topic: OpDescribeConfigs, group: OpDescribeConfigs, bare: OpDescribeConfigs},
	apis.AlterConfigs:                 {topic: OpAlterConfigs, group: OpAlterConfigs, bare: OpAlterConfigs},
	apis.IncrementalAlterConfigs:      {topic: OpAlterConfigs, group: OpAlterConfigs, bare: OpAlterConfigs},
	apis.AlterReplicaLogDirs:          {cluster: OpAlter},
	apis.DescribeLogDirs:              {cluster: OpDescribe},
	apis.CreatePartitions:             {topic: OpAlter},
	apis.CreateDelegationToken:        {open: true}, // token APIs authorize the token owner, not an ACL resource here
	apis.RenewDelegationToken:         {open: true},
	apis.ExpireDelegationToken:        {open: true},
	apis.DescribeDelegationToken:      {open: true},
	apis.DeleteGroups:                 {group: OpDelete},
	apis.ElectLeaders:                 {cluster: OpAlter},
	apis.AlterPartitionAssignments:    {cluster: OpAlter},
	apis.ListPartitionReassignments:   {cluster: OpDescribe},
	apis.OffsetDelete:                 {group: OpDelete, topic: OpRead},
	apis.DescribeClientQuotas:         {cluster: OpDescribeConfigs},
	apis.AlterClientQuotas:            {cluster: OpAlterConfigs},
	apis.DescribeUserSCRAMCredentials: {cluster: OpDescribe},
	apis.AlterUserSCRAMCredentials:    {cluster: OpAlter},
	apis.DescribeQuorum:               {cluster: OpDescribe},
	apis.UpdateFeatures:               {cluster: OpAlter},
	apis.DescribeCluster:              {open: true}, // any principal (AuthHelper.computeDescribeClusterResponse: DESCRIBE on the cluster only fills cluster_authorized_operations)
	apis.DescribeProducers:            {topic: OpRead},
	apis.DescribeTransactions:         {txn: OpDescribe},
	apis.ListTransactions:             {}, // the answer lists the transactional ids the principal may describe
	apis.ConsumerGroupHeartbeat:       {group: OpRead, topic: OpDescribe},
	apis.ConsumerGroupDescribe:        {group: OpDescribe},
	apis.GetTelemetrySubscriptions:    {open: true},
	apis.PushTelemetry:                {open: true},
	apis.ListConfigResources:          {cluster: OpDescribeConfigs},
	apis.DescribeTopicPartitions:      {topic: OpDescribe},
	apis.ShareGroupHeartbeat:          {group: OpRead, topic: OpDescribe},
	apis.ShareGroupDescribe:           {group: OpDescribe},
	apis.ShareFetch:                   {group: OpRead, topic: OpRead},
	apis.ShareAcknowledge:             {group: OpRead, topic: OpRead},
	apis.StreamsGroupHeartbeat:        {group: OpRead, topic: OpDescribe},
	apis.StreamsGroupDescribe:         {group: OpDescribe},
	apis.DescribeShareGroupOffsets:    {group: OpDescribe, topic: OpDescribe},
	apis.AlterShareGroupOffsets:       {group: OpRead, topic: OpRead},
	apis.DeleteShareGroupOffsets:      {group: OpDelete, topic: OpRead},
}

// interBroker is what a key not in needs requires: inter-broker and
// controller RPCs are CLUSTER_ACTION on the cluster.
var interBroker = need{cluster: OpClusterAction}

func needOf(key int16) need {
	if n, ok := needs[key]; ok {
		return n
	}
	return interBroker
}
