module github.com/idemq/idemq/bench

go 1.25.0

replace github.com/idemq/idemq => ../

require (
	github.com/bwmarrin/snowflake v0.3.0
	github.com/idemq/idemq v0.0.0-00010101000000-000000000000
	github.com/sony/sonyflake/v2 v2.2.0
)
