// Package prometheus holds hotcert's Prometheus alerting rules
// (hotcert-alerts.yaml, with promtool unit tests in hotcert-alerts_test.yaml)
// and Grafana dashboard (hotcert-dashboard.json). Its tests run the rules'
// unit tests with promtool and check that every expression of the rules and
// the dashboard names series, and labels, that hotcert's code registers.
package prometheus
