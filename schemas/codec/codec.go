package codec

import (
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

var (
	decodeOptions = jsonv2.JoinOptions(
		jsonv1.DefaultOptionsV1(),
		// apimachinery matches names case-sensitively (sigs.k8s.io/json).
		jsonv2.MatchCaseInsensitiveNames(false),
		jsonv1.MatchCaseSensitiveDelimiter(false),
		jsontext.AllowDuplicateNames(true),
		jsontext.AllowInvalidUTF8(true),
	)
)

// Unmarshal decodes data into v, as apimachinery decodes an API object.
func Unmarshal(data []byte, v any) error {
	return jsonv2.Unmarshal(data, v, decodeOptions)
}
