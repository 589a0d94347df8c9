// Package operation holds what every pipeline operation starts from, below
// the operations themselves so that each (pipeline, pipeline/review) can
// take it: the Selection a front door makes and the render options it
// becomes, the prune Protection, what an operation's context carries for
// its renders (the load memo, the components' transforms cache) and where
// the one cache lives.
package operation
