package org.roster.test;

/**
 * The service of the Dubbo scenarios, in Java and in Go (tests/clients/go/dubbo_service.go):
 * Triple without an IDL, its messages hessian2 POJOs. The method keeps the Go name,
 * {@code Greet}: the Triple path is {@code /org.roster.test.Greeter/Greet} on both sides.
 */
public interface Greeter {
    GreetReply Greet(GreetRequest request);
}
