module example.com/accelerate-char-lm

go 1.19

require github.com/accelerate-cpp/accelerate/go v0.1.0

// The module of an installed tree is <prefix>/share/accelerate/go; this one is the source tree's.
replace github.com/accelerate-cpp/accelerate/go => ../../bindings/go
