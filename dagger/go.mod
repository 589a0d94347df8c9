module dagger/opm

go 1.25.0

require (
	dagger.io/dagger v0.19.7
	github.com/opmodel/pipeline v0.0.0
)

replace github.com/opmodel/pipeline => ../
