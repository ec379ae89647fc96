module example.com/consumer

go 1.19

require github.com/accelerate-cpp/accelerate/go v0.1.0

// The test go_installed_consumer_build writes its own go.mod, replacing the module by the installed
// tree's share/accelerate/go; this one builds against the source tree.
replace github.com/accelerate-cpp/accelerate/go => ../
