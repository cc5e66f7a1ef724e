package audit

import "github.com/tollgate-kafka/tollgate/apis"

// maxKey bounds the API key sets of filters; Kafka's keys are far below
// it (kmsg.MaxKey is in the 90s).
const maxKey = 256

// APIName returns kmsg's name for key (Produce, ApiVersions, ...), or
// "unknown" for a key kmsg does not know. Client-sent keys are arbitrary
// int16s: this keeps them out of labels and logs as a closed set.
func APIName(key int16) string {
	if in := apis.Of(key); in.Known {
		return in.Name
	}
	return "unknown"
}
