package main

// The service the dubbo-go scenarios serve and call: Triple without an IDL, its messages
// encoded with hessian2. This is the code protoc-gen-triple writes for a hessian2 service
// (a ServiceInfo for the server, a ClientInfo for the client, POJOs with a Java class
// name), written by hand here because the suite has no protoc.

import (
	"context"

	hessian "github.com/apache/dubbo-go-hessian2"

	"dubbo.apache.org/dubbo-go/v3/client"
	"dubbo.apache.org/dubbo-go/v3/common"
	"dubbo.apache.org/dubbo-go/v3/common/constant"
	"dubbo.apache.org/dubbo-go/v3/protocol/triple/triple_protocol"
)

// dubboGreeterInterface is the interface the providers export; the mapping in roster's
// config store is keyed by it.
const dubboGreeterInterface = "org.roster.test.Greeter"

// GreetRequest names the caller.
type GreetRequest struct {
	Caller string
}

// JavaClassName makes GreetRequest a hessian2 POJO.
func (*GreetRequest) JavaClassName() string { return "org.roster.test.GreetRequest" }

// GreetReply names the provider that answered, so the consumer can count who did.
type GreetReply struct {
	Provider string
	Greeting string
}

// JavaClassName makes GreetReply a hessian2 POJO.
func (*GreetReply) JavaClassName() string { return "org.roster.test.GreetReply" }

func init() {
	hessian.RegisterPOJO(&GreetRequest{})
	hessian.RegisterPOJO(&GreetReply{})
}

// greeterHandler is what a provider implements.
type greeterHandler interface {
	Greet(ctx context.Context, req *GreetRequest) (*GreetReply, error)
}

var greeterServiceInfo = common.ServiceInfo{
	InterfaceName: dubboGreeterInterface,
	ServiceType:   (*greeterHandler)(nil),
	Methods: []common.MethodInfo{{
		Name:        "Greet",
		Type:        constant.CallUnary,
		ReqInitFunc: func() interface{} { return new(GreetRequest) },
		MethodFunc: func(ctx context.Context, args []interface{}, handler interface{}) (interface{}, error) {
			reply, err := handler.(greeterHandler).Greet(ctx, args[0].(*GreetRequest))
			if err != nil {
				return nil, err
			}
			return triple_protocol.NewResponse(reply), nil
		},
	}},
}

var greeterClientInfo = client.ClientInfo{
	InterfaceName:        dubboGreeterInterface,
	MethodNames:          []string{"Greet"},
	ConnectionInjectFunc: func(interface{}, *client.Connection) {},
}

// GreeterProvider answers with its provider's name and the greeting the config centre gave
// it (dubbo-go exports only exported handler types).
type GreeterProvider struct {
	name     string
	greeting string
}

func (g *GreeterProvider) Greet(_ context.Context, req *GreetRequest) (*GreetReply, error) {
	return &GreetReply{Provider: g.name, Greeting: g.greeting + ", " + req.Caller}, nil
}
