module accelerate/go

go 1.19
