module accelerate/examples/go

go 1.19

require accelerate/go v0.0.0

replace accelerate/go => ../../bindings/go
