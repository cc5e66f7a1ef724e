package audit

import "github.com/twmb/franz-go/pkg/kmsg"

// maxKey bounds the API keys tables are built for; Kafka's keys are far
// below it (kmsg.MaxKey is in the 90s).
const maxKey = 256

// apiNames maps a key to kmsg's name; "" when kmsg does not know it.
var apiNames = func() (names [maxKey]string) {
	for k := range int16(maxKey) {
		if n := kmsg.NameForKey(k); n != "Unknown" {
			names[k] = n
		}
	}
	return names
}()

// APIName returns kmsg's name for key (Produce, ApiVersions, ...), or
// "unknown" for a key kmsg does not know. Client-sent keys are arbitrary
// int16s: this keeps them out of labels and logs as a closed set.
func APIName(key int16) string {
	if key >= 0 && int(key) < maxKey && apiNames[key] != "" {
		return apiNames[key]
	}
	return "unknown"
}
