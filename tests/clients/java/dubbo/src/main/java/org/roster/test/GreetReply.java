package org.roster.test;

import java.io.Serializable;

/** Names the provider that answered, so that a consumer can count who did. */
public class GreetReply implements Serializable {
    private static final long serialVersionUID = 1L;

    private String provider;
    private String greeting;

    public GreetReply() {}

    public GreetReply(String provider, String greeting) {
        this.provider = provider;
        this.greeting = greeting;
    }

    public String getProvider() {
        return provider;
    }

    public void setProvider(String provider) {
        this.provider = provider;
    }

    public String getGreeting() {
        return greeting;
    }

    public void setGreeting(String greeting) {
        this.greeting = greeting;
    }
}
