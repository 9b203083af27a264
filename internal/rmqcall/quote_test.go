package rmqcall

import (
	"encoding/json"
	"testing"
)

func TestQuoteIntKeys(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"broker ids", `{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"}}`, `{"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"}}`},
		{"negative and spaced", `{ -1 : "x", 7:1}`, `{ "-1" : "x", "7":1}`},
		{"array values untouched", `{"a":[1,2,{3:[4,5]}],"b":6}`, `{"a":[1,2,{"3":[4,5]}],"b":6}`},
		{"strings untouched", `{"k":"{0:1,2:3}","e":"\",4:"}`, `{"k":"{0:1,2:3}","e":"\",4:"}`},
		{"already quoted", `{"0":"a"}`, `{"0":"a"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(quoteIntKeys([]byte(tt.in)))
			if got != tt.want {
				t.Errorf("quoteIntKeys(%s) = %s, want %s", tt.in, got, tt.want)
			}
			if !json.Valid([]byte(got)) {
				t.Errorf("quoteIntKeys(%s) = %s: not JSON", tt.in, got)
			}
		})
	}
}
