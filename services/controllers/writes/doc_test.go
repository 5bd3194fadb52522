package writes_test

import (
	"fmt"

	"github.com/cairn-dev/cairn/services/controllers/writes"
)

func ExampleTracker() {
	t := writes.New()
	t.Wrote("default/pi", "42") // the status update returned resourceVersion 42
	fmt.Println(t.Seen("default/pi", "41"))
	fmt.Println(t.Seen("default/pi", "42"))
	// Output:
	// false
	// true
}
