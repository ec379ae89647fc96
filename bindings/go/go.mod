module github.com/accelerate-cpp/accelerate/go

go 1.19
