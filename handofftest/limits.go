package handofftest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The API server's size limits, which the cluster enforces on every write
// (and on [Cluster.Add]).
const (
	// MaxAnnotationBytes bounds the annotations of one object: the keys
	// and values of all of them together, as the API server's validation
	// of object metadata counts them (apimachinery's
	// TotalAnnotationSizeLimitB). Over it, a write fails with a 422
	// Invalid error on metadata.annotations.
	MaxAnnotationBytes = apivalidation.TotalAnnotationSizeLimitB
	// MaxDataBytes bounds the data of one ConfigMap or Secret: the keys
	// and values of data and binaryData together. Over it, a write fails
	// with a 422 Invalid error.
	MaxDataBytes = 1024 * 1024
	// MaxObjectBytes bounds one stored object: etcd's default request
	// limit (--max-request-bytes), 1.5 MiB. The cluster measures the
	// object's JSON, which for built-in kinds is larger than the protobuf
	// etcd would hold and for custom resources the same; over it, a write
	// fails with a 413 RequestEntityTooLarge error saying "etcdserver:
	// request is too large".
	MaxObjectBytes = 3 * 512 * 1024
)

// checkLimits refuses obj, about to be stored as an object of kind k, when
// it is over one of the API server's size limits.
func checkLimits(k kindInfo, obj *unstructured.Unstructured) error {
	if err := apivalidation.ValidateAnnotationsSize(obj.GetAnnotations()); err != nil {
		return apierrors.NewInvalid(k.groupKind(), obj.GetName(), field.ErrorList{
			field.TooLong(field.NewPath("metadata", "annotations"), "", MaxAnnotationBytes),
		})
	}
	if k.gvr.Group == "" && (k.kind == "ConfigMap" || k.kind == "Secret") {
		if n := dataBytes(obj); n > MaxDataBytes {
			return apierrors.NewInvalid(k.groupKind(), obj.GetName(), field.ErrorList{
				field.TooLong(field.NewPath("data"), "", MaxDataBytes),
			})
		}
	}
	b, err := json.Marshal(obj.Object)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if len(b) > MaxObjectBytes {
		return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("etcdserver: request is too large: %s %q is %d bytes, the limit is %d",
			k.kind, obj.GetName(), len(b), MaxObjectBytes))
	}
	return nil
}

// dataBytes is what the API server counts of a ConfigMap's or Secret's
// data: the keys and values of data, binaryData and stringData, a value
// that travels base64-encoded (binaryData, a Secret's data) by its decoded
// length.
func dataBytes(obj *unstructured.Unstructured) int {
	secret := obj.GetKind() == "Secret"
	n := 0
	for _, f := range []string{"data", "binaryData", "stringData"} {
		m, ok := obj.Object[f].(map[string]any)
		if !ok {
			continue
		}
		encoded := f == "binaryData" || f == "data" && secret
		for k, v := range m {
			s, _ := v.(string)
			n += len(k) + len(s)
			if encoded {
				n += base64.StdEncoding.DecodedLen(len(s)) - len(s)
			}
		}
	}
	return n
}
