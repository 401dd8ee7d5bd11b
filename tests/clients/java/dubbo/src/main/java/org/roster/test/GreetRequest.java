package org.roster.test;

import java.io.Serializable;

/** Names the caller. hessian2 carries the fields by name; dubbo-go names them as here. */
public class GreetRequest implements Serializable {
    private static final long serialVersionUID = 1L;

    private String caller;

    public GreetRequest() {}

    public GreetRequest(String caller) {
        this.caller = caller;
    }

    public String getCaller() {
        return caller;
    }

    public void setCaller(String caller) {
        this.caller = caller;
    }
}
