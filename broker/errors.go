package broker

import (
	"errors"

	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/twmb/franz-go/pkg/kerr"
)

// storageCode is the one classifier from storage errors to Kafka error
// codes. Anything unrecognised is KAFKA_STORAGE_ERROR (56), which clients
// retry after refreshing metadata.
func storageCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, storage.ErrCorruptMessage):
		return kerr.CorruptMessage.Code
	case errors.Is(err, storage.ErrInvalidRecord):
		return kerr.InvalidRecord.Code
	case errors.Is(err, storage.ErrMessageTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, storage.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, storage.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, storage.ErrUnknownProducerID):
		return kerr.UnknownProducerID.Code
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	}
	return kerr.KafkaStorageError.Code
}
