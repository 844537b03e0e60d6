module sidecar/bench/loadgen

go 1.22
