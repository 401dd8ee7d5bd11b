package main

// The client libraries every scenario builds against, named here too so that go.mod and
// go.sum keep them whichever scenario files exist.
import (
	_ "dubbo.apache.org/dubbo-go/v3"
	_ "dubbo.apache.org/dubbo-go/v3/imports"
	_ "github.com/nacos-group/nacos-sdk-go/clients"
	_ "github.com/nacos-group/nacos-sdk-go/v2/clients"
	_ "go-micro.dev/v4"
	_ "google.golang.org/grpc"
	_ "google.golang.org/grpc/resolver/dns"
)
