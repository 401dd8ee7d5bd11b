package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// rosterHTTP is the plain Nacos v1 HTTP API of one node, for the steps that change
// something "through another face" than the client under test, and for reading back what
// the server holds.
type rosterHTTP struct {
	base     string // http://host:port
	username string
	password string
	token    string
	client   *http.Client
}

func newRosterHTTP(server, username, password string) *rosterHTTP {
	return &rosterHTTP{
		base:     "http://" + server,
		username: username,
		password: password,
		client:   &http.Client{Timeout: 10 * time.Second},
	}
}

// login takes a token for username/password.
func (r *rosterHTTP) login() error {
	form := url.Values{"username": {r.username}, "password": {r.password}}
	resp, err := r.client.PostForm(r.base+"/nacos/v1/auth/login", form)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("login: %d %s", resp.StatusCode, body)
	}
	var v struct {
		AccessToken string `json:"accessToken"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.AccessToken == "" {
		return fmt.Errorf("login: no accessToken in %s", body)
	}
	r.token = v.AccessToken
	return nil
}

// call sends method path with params (in the query for GET and DELETE, as a form
// otherwise) and the token, logging in first if needed; it answers status and body.
func (r *rosterHTTP) call(method, path string, params url.Values) (int, string, error) {
	if r.token == "" {
		if err := r.login(); err != nil {
			return 0, "", err
		}
	}
	q := url.Values{"accessToken": {r.token}}
	var body io.Reader
	if method == "GET" || method == "DELETE" {
		for k, vs := range params {
			q[k] = vs
		}
	} else {
		body = strings.NewReader(params.Encode())
	}
	req, err := http.NewRequest(method, r.base+path+"?"+q.Encode(), body)
	if err != nil {
		return 0, "", err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// must is call that fails unless the answer is 200.
func (r *rosterHTTP) must(method, path string, params url.Values) (string, error) {
	status, body, err := r.call(method, path, params)
	if err != nil {
		return "", err
	}
	if status != 200 {
		return "", fmt.Errorf("%s %s: %d %s", method, path, status, body)
	}
	return body, nil
}

// instances lists a service's instances over v1 (healthy and unhealthy), as "ip:port" →
// healthy.
func (r *rosterHTTP) instances(namespace, group, service string) (map[string]bool, error) {
	params := url.Values{"serviceName": {service}, "groupName": {group}}
	if namespace != "" {
		params.Set("namespaceId", namespace)
	}
	body, err := r.must("GET", "/nacos/v1/ns/instance/list", params)
	if err != nil {
		return nil, err
	}
	var v struct {
		Hosts []struct {
			IP      string `json:"ip"`
			Port    int    `json:"port"`
			Healthy bool   `json:"healthy"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		return nil, fmt.Errorf("instance list: %v in %s", err, body)
	}
	hosts := map[string]bool{}
	for _, h := range v.Hosts {
		hosts[fmt.Sprintf("%s:%d", h.IP, h.Port)] = h.Healthy
	}
	return hosts, nil
}
