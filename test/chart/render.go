// render: a stand-in for `helm template` (and the schema check of `helm install`) for the
// chart tests, built offline from Debian's Go packages. It uses the engine Helm uses —
// text/template with sprig's function map minus env/expandenv — and re-implements Helm 3's
// own parts after pkg/engine, pkg/chartutil and pkg/releaseutil: .Values (values.yaml
// coalesced with -f files; null deletes a key), .Release, .Chart (Chart.yaml), .Capabilities,
// .Template, .Files; Chart.yaml's kubeVersion checked against --kube-version; include/tpl/required/fail/lookup/toYaml/fromYaml/toJson/fromJson and the
// must*/Array variants; values.schema.json checked with gojsonschema (Helm ≤ 3.17's
// validator) against the coalesced values; templates parsed as one set, partials (_*) not
// rendered, "<no value>" blanked, documents split on ---, YAML-checked and sorted in Helm's
// install order, then printed as `helm template` prints them.
//
// Usage: render [-f values.yaml]... [--name N] [--namespace NS] [--kube-version v1.31.0]
//
//	[--api-versions group/version]... [--notes] CHART_DIR
//
// Exit 0 with the manifests (or with --notes the rendered NOTES.txt) on stdout; exit 1 with
// "Error: ..." (Helm's wording) on stderr.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/template"

	semver "github.com/Masterminds/semver" // v3, in Debian's GOPATH layout
	"github.com/Masterminds/sprig"
	"github.com/ghodss/yaml"
	"github.com/xeipuuv/gojsonschema"
)

// Metadata is Helm's chart.Metadata: what .Chart exposes (a struct, so a misspelt field is an error).
type Metadata struct {
	Name         string            `json:"name,omitempty"`
	Home         string            `json:"home,omitempty"`
	Sources      []string          `json:"sources,omitempty"`
	Version      string            `json:"version,omitempty"`
	Description  string            `json:"description,omitempty"`
	Keywords     []string          `json:"keywords,omitempty"`
	Maintainers  []interface{}     `json:"maintainers,omitempty"`
	Icon         string            `json:"icon,omitempty"`
	APIVersion   string            `json:"apiVersion,omitempty"`
	Condition    string            `json:"condition,omitempty"`
	Tags         string            `json:"tags,omitempty"`
	AppVersion   string            `json:"appVersion,omitempty"`
	Deprecated   bool              `json:"deprecated,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	KubeVersion  string            `json:"kubeVersion,omitempty"`
	Dependencies []interface{}     `json:"dependencies,omitempty"`
	Type         string            `json:"type,omitempty"`
}

// VersionSet is chartutil.VersionSet: .Capabilities.APIVersions.Has "group/version".
type VersionSet []string

// Has reports whether the set holds apiVersion (or "apiVersion/Kind").
func (v VersionSet) Has(apiVersion string) bool {
	for _, x := range v {
		if x == apiVersion {
			return true
		}
	}
	return false
}

// KubeVersion is chartutil.KubeVersion.
type KubeVersion struct {
	Version string
	Major   string
	Minor   string
}

// String returns the version, as Helm's does.
func (kv *KubeVersion) String() string { return kv.Version }

// GitVersion is the deprecated alias of Version.
func (kv *KubeVersion) GitVersion() string { return kv.Version }

// Capabilities is chartutil.Capabilities (HelmVersion omitted).
type Capabilities struct {
	KubeVersion KubeVersion
	APIVersions VersionSet
}

// Files is Helm's engine.files: the chart's non-template files.
type Files map[string][]byte

// Get returns a file's content as a string ("" when missing).
func (f Files) Get(name string) string { return string(f[name]) }

// GetBytes returns a file's content.
func (f Files) GetBytes(name string) []byte { return f[name] }

// Lines returns a file's lines.
func (f Files) Lines(name string) []string {
	if f[name] == nil {
		return []string{}
	}
	return strings.Split(string(f[name]), "\n")
}

// Helm's default API versions are those of its client-go; these are the ones this chart may ask about.
var defaultAPIVersions = []string{
	"v1", "apps/v1", "rbac.authorization.k8s.io/v1", "discovery.k8s.io/v1", "events.k8s.io/v1",
	"policy/v1", "scheduling.k8s.io/v1", "apiextensions.k8s.io/v1",
}

// installOrder is releaseutil.InstallOrder.
var installOrder = []string{
	"PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
	"PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList", "ConfigMap", "StorageClass",
	"PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole",
	"ClusterRoleList", "ClusterRoleBinding", "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding",
	"RoleBindingList", "Service", "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
	"HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService",
}

const (
	warnStart = "HELM_ERR_START"
	warnEnd   = "HELM_ERR_END"
)

var warnRegex = regexp.MustCompile(warnStart + `((?s).*)` + warnEnd)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	var valueFiles, apiVersions multi
	name := flag.String("name", "release-name", "release name")
	namespace := flag.String("namespace", "default", "release namespace")
	kubeVersion := flag.String("kube-version", "v1.31.0", "Kubernetes version for .Capabilities")
	notes := flag.Bool("notes", false, "print the rendered NOTES.txt instead of the manifests")
	flag.Var(&valueFiles, "f", "values file (YAML or JSON); repeatable, later files win")
	flag.Var(&apiVersions, "api-versions", "extra API version for .Capabilities.APIVersions; repeatable")
	// Flags may come before or after the chart, as with helm.
	var positional []string
	for args := os.Args[1:]; ; {
		if err := flag.CommandLine.Parse(args); err != nil {
			os.Exit(2)
		}
		if flag.NArg() == 0 {
			break
		}
		positional = append(positional, flag.Arg(0))
		args = flag.Args()[1:]
	}
	if len(positional) != 1 {
		fmt.Fprintln(os.Stderr, "usage: render [-f values.yaml]... [--name N] [--namespace NS] [--notes] CHART_DIR")
		os.Exit(2)
	}
	out, err := run(positional[0], valueFiles, *name, *namespace, *kubeVersion, apiVersions, *notes)
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %s\n", err)
		os.Exit(1)
	}
	os.Stdout.WriteString(out)
}

func run(chartDir string, valueFiles []string, name, namespace, kubeVersion string, apiVersions []string, notes bool) (string, error) {
	meta, err := loadMetadata(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		return "", err
	}
	if meta.KubeVersion != "" && !isCompatibleRange(meta.KubeVersion, kubeVersion) {
		return "", fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", meta.KubeVersion, kubeVersion)
	}
	defaults, err := readValuesFile(filepath.Join(chartDir, "values.yaml"), true)
	if err != nil {
		return "", err
	}
	user := map[string]interface{}{}
	for _, f := range valueFiles {
		v, err := readValuesFile(f, false)
		if err != nil {
			return "", err
		}
		user = mergeMaps(user, v)
	}
	values := coalesce(user, defaults)
	if schema, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json")); err == nil {
		if err := validateAgainstSchema(values, schema); err != nil {
			return "", fmt.Errorf("values don't meet the specifications of the schema(s) in the following chart(s):\n%s:\n%s", meta.Name, err)
		}
	}
	templates, files, err := loadChartFiles(chartDir, meta.Name)
	if err != nil {
		return "", err
	}
	major, minor := splitKubeVersion(kubeVersion)
	top := map[string]interface{}{
		"Values":  values,
		"Release": map[string]interface{}{"Name": name, "Namespace": namespace, "IsUpgrade": false, "IsInstall": true, "Revision": 1, "Service": "Helm"},
		"Chart":   meta,
		"Capabilities": &Capabilities{
			KubeVersion: KubeVersion{Version: kubeVersion, Major: major, Minor: minor},
			APIVersions: append(VersionSet(append([]string{}, defaultAPIVersions...)), apiVersions...),
		},
		"Files":     files,
		"Subcharts": map[string]interface{}{},
	}
	rendered, err := render(templates, top, meta.Name+"/templates")
	if err != nil {
		return "", err
	}
	notesName := meta.Name + "/templates/NOTES.txt"
	if notes {
		return rendered[notesName], nil
	}
	return sortAndPrint(rendered, notesName)
}

func loadMetadata(file string) (*Metadata, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("Chart.yaml file is missing: %w", err)
	}
	var m Metadata
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("cannot load Chart.yaml: %w", err)
	}
	if m.APIVersion == "" || m.Name == "" || m.Version == "" {
		return nil, errors.New("validation: chart.metadata.apiVersion, name and version are required")
	}
	return &m, nil
}

// isCompatibleRange is chartutil.IsCompatibleRange.
func isCompatibleRange(constraint, ver string) bool {
	sv, err := semver.NewVersion(ver)
	if err != nil {
		return false
	}
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		return false
	}
	return c.Check(sv)
}

// readValuesFile is chartutil.ReadValues: sigs.k8s.io/yaml semantics (numbers become float64).
func readValuesFile(file string, optional bool) (map[string]interface{}, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		if optional && errors.Is(err, fs.ErrNotExist) {
			return map[string]interface{}{}, nil
		}
		return nil, err
	}
	vals := map[string]interface{}{}
	if err := yaml.Unmarshal(data, &vals); err != nil {
		return nil, fmt.Errorf("failed to parse %s: %w", file, err)
	}
	if vals == nil {
		vals = map[string]interface{}{}
	}
	return vals, nil
}

// mergeMaps is how `helm install -f a -f b` merges value files: b wins, maps merge deeply.
func mergeMaps(a, b map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(a))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if bm, ok := v.(map[string]interface{}); ok {
			if am, ok := out[k].(map[string]interface{}); ok {
				out[k] = mergeMaps(am, bm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// coalesce is chartutil.CoalesceValues for a chart without dependencies: user values win,
// maps merge deeply, and a null in the user's values deletes the chart's default (a null for
// a key the chart has no default for stays, as in Helm).
func coalesce(user, defaults map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(user))
	for k, v := range user {
		out[k] = v
	}
	for k, dv := range defaults {
		uv, present := out[k]
		if !present {
			out[k] = dv
			continue
		}
		if uv == nil {
			delete(out, k)
			continue
		}
		um, uok := uv.(map[string]interface{})
		dm, dok := dv.(map[string]interface{})
		if uok && dok {
			out[k] = coalesce(um, dm)
		}
		// A table and a non-table: the user's value stays (Helm prints a warning).
	}
	return out
}

// validateAgainstSchema is chartutil.ValidateAgainstSingleSchema.
func validateAgainstSchema(values map[string]interface{}, schema []byte) error {
	valuesYAML, err := yaml.Marshal(values)
	if err != nil {
		return err
	}
	valuesJSON, err := yaml.YAMLToJSON(valuesYAML)
	if err != nil {
		return err
	}
	if bytes.Equal(valuesJSON, []byte("null")) {
		valuesJSON = []byte("{}")
	}
	result, err := gojsonschema.Validate(gojsonschema.NewBytesLoader(schema), gojsonschema.NewBytesLoader(valuesJSON))
	if err != nil {
		return err
	}
	if result.Valid() {
		return nil
	}
	var sb strings.Builder
	for _, desc := range result.Errors() {
		sb.WriteString(fmt.Sprintf("- %s\n", desc))
	}
	return errors.New(sb.String())
}

type tmpl struct {
	name string
	text string
}

// loadChartFiles returns templates/** (named "<chart>/templates/...") and the other files for .Files.
func loadChartFiles(chartDir, chartName string) ([]tmpl, Files, error) {
	var templates []tmpl
	files := Files{}
	err := filepath.WalkDir(chartDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(chartDir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "charts" {
				return filepath.SkipDir
			}
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(rel, "templates/"):
			templates = append(templates, tmpl{name: chartName + "/" + rel, text: string(data)})
		case rel == "Chart.yaml" || rel == "values.yaml" || rel == "values.schema.json" || rel == ".helmignore":
		default:
			files[rel] = data
		}
		return nil
	})
	return templates, files, err
}

func splitKubeVersion(v string) (string, string) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return "1", "31"
	}
	return parts[0], parts[1]
}

// funcMap is engine.funcMap: sprig without env/expandenv, plus Helm's own functions.
func funcMap() template.FuncMap {
	f := sprig.TxtFuncMap()
	delete(f, "env")
	delete(f, "expandenv")
	extra := template.FuncMap{
		"toYaml":        toYAML,
		"mustToYaml":    mustToYAML,
		"fromYaml":      fromYAML,
		"fromYamlArray": fromYAMLArray,
		"toJson":        toJSON,
		"mustToJson":    mustToJSON,
		"fromJson":      fromJSON,
		"fromJsonArray": fromJSONArray,
		// Placeholders until render() binds them to the template set, as Helm does.
		"include":  func(string, interface{}) string { return "not implemented" },
		"tpl":      func(string, interface{}) interface{} { return "not implemented" },
		"required": func(string, interface{}) (interface{}, error) { return "not implemented", nil },
		// `helm template` and `helm install --dry-run` have no cluster: lookup finds nothing.
		"lookup": func(string, string, string, string) (map[string]interface{}, error) {
			return map[string]interface{}{}, nil
		},
	}
	for k, v := range extra {
		f[k] = v
	}
	return f
}

func toYAML(v interface{}) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

func mustToYAML(v interface{}) (string, error) {
	data, err := yaml.Marshal(v)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(data), "\n"), nil
}

func fromYAML(str string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(str), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func fromYAMLArray(str string) []interface{} {
	a := []interface{}{}
	if err := yaml.Unmarshal([]byte(str), &a); err != nil {
		a = []interface{}{err.Error()}
	}
	return a
}

func toJSON(v interface{}) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(data)
}

func mustToJSON(v interface{}) (string, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(data), nil
}

func fromJSON(str string) map[string]interface{} {
	m := make(map[string]interface{})
	if err := json.Unmarshal([]byte(str), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func fromJSONArray(str string) []interface{} {
	a := []interface{}{}
	if err := json.Unmarshal([]byte(str), &a); err != nil {
		a = []interface{}{err.Error()}
	}
	return a
}

const recursionMaxNums = 1000

func includeFun(t *template.Template, includedNames map[string]int) func(string, interface{}) (string, error) {
	return func(name string, data interface{}) (string, error) {
		var buf strings.Builder
		if v, ok := includedNames[name]; ok {
			if v > recursionMaxNums {
				return "", fmt.Errorf("rendering template has a nested reference name: %s: unable to execute template", name)
			}
			includedNames[name]++
		} else {
			includedNames[name] = 1
		}
		err := t.ExecuteTemplate(&buf, name, data)
		includedNames[name]--
		return buf.String(), err
	}
}

func tplFun(parent *template.Template, includedNames map[string]int) func(string, interface{}) (string, error) {
	return func(tpl string, vals interface{}) (string, error) {
		t, err := parent.Clone()
		if err != nil {
			return "", fmt.Errorf("cannot clone template: %w", err)
		}
		t.Option("missingkey=zero")
		t.Funcs(template.FuncMap{"include": includeFun(t, includedNames), "tpl": tplFun(t, includedNames)})
		t, err = t.New(parent.Name()).Parse(tpl)
		if err != nil {
			return "", fmt.Errorf("cannot parse template %q: %w", tpl, err)
		}
		var buf strings.Builder
		if err := t.Execute(&buf, vals); err != nil {
			return "", fmt.Errorf("error during tpl function execution for %q: %w", tpl, err)
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
}

// render is engine.render (non-strict, not lint mode).
func render(templates []tmpl, top map[string]interface{}, basePath string) (rendered map[string]string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("rendering template failed: %v", r)
		}
	}()
	t := template.New("gotpl")
	t.Option("missingkey=zero")
	fm := funcMap()
	includedNames := map[string]int{}
	fm["include"] = includeFun(t, includedNames)
	fm["tpl"] = tplFun(t, includedNames)
	fm["required"] = func(warn string, val interface{}) (interface{}, error) {
		if val == nil {
			return val, errors.New(warnStart + warn + warnEnd)
		} else if s, ok := val.(string); ok && s == "" {
			return val, errors.New(warnStart + warn + warnEnd)
		}
		return val, nil
	}
	fm["fail"] = func(msg string) (string, error) { return "", errors.New(warnStart + msg + warnEnd) }
	t.Funcs(fm)

	// sortTemplates: deepest paths first, then reverse lexical order.
	sort.SliceStable(templates, func(i, j int) bool {
		a, b := templates[i].name, templates[j].name
		ca, cb := strings.Count(a, "/"), strings.Count(b, "/")
		if ca == cb {
			return a > b
		}
		return ca > cb
	})
	for _, tp := range templates {
		if _, err := t.New(tp.name).Parse(tp.text); err != nil {
			return nil, cleanupParseError(tp.name, err)
		}
	}
	rendered = map[string]string{}
	for _, tp := range templates {
		if strings.HasPrefix(path.Base(tp.name), "_") {
			continue
		}
		vals := map[string]interface{}{}
		for k, v := range top {
			vals[k] = v
		}
		vals["Template"] = map[string]interface{}{"Name": tp.name, "BasePath": basePath}
		var buf strings.Builder
		if err := t.ExecuteTemplate(&buf, tp.name, vals); err != nil {
			return nil, cleanupExecError(tp.name, err)
		}
		rendered[tp.name] = strings.ReplaceAll(buf.String(), "<no value>", "")
	}
	return rendered, nil
}

// cleanupParseError is Helm 3's: "parse error at (file:line): message".
func cleanupParseError(filename string, err error) error {
	tokens := strings.Split(err.Error(), ": ")
	if len(tokens) == 1 {
		return fmt.Errorf("parse error in (%s): %s", filename, err)
	}
	return fmt.Errorf("parse error at (%s): %s", tokens[1], tokens[len(tokens)-1])
}

// cleanupExecError is Helm 3's: "execution error at (file:line:col): message" for fail/required.
func cleanupExecError(filename string, err error) error {
	var execErr template.ExecError
	if !errors.As(err, &execErr) {
		return err
	}
	tokens := strings.SplitN(err.Error(), ": ", 3)
	if len(tokens) != 3 {
		return fmt.Errorf("execution error in (%s): %s", filename, err)
	}
	if parts := warnRegex.FindStringSubmatch(tokens[2]); len(parts) >= 2 {
		return fmt.Errorf("execution error at (%s): %s", tokens[1], parts[1])
	}
	return err
}

var docSep = regexp.MustCompile("(?:^|\\s*\n)---\\s*")

type manifest struct {
	name    string
	content string
	kind    string
}

// sortAndPrint is releaseutil.SplitManifests + SortManifests (no hooks here) + `helm template`'s printing.
func sortAndPrint(rendered map[string]string, notesName string) (string, error) {
	names := make([]string, 0, len(rendered))
	for n := range rendered {
		names = append(names, n)
	}
	sort.Strings(names)
	var manifests []manifest
	for _, n := range names {
		if n == notesName || strings.TrimSpace(rendered[n]) == "" {
			continue
		}
		for _, doc := range docSep.Split(strings.TrimSpace(rendered[n]), -1) {
			doc = strings.TrimSpace(doc)
			if doc == "" {
				continue
			}
			var head struct {
				Version  string `json:"apiVersion"`
				Kind     string `json:"kind,omitempty"`
				Metadata *struct {
					Name        string            `json:"name"`
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata,omitempty"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				return "", fmt.Errorf("YAML parse error on %s: %w", n, err)
			}
			if head.Metadata != nil && head.Metadata.Annotations["helm.sh/hook"] != "" {
				return "", fmt.Errorf("%s: hooks are not supported by this renderer", n)
			}
			manifests = append(manifests, manifest{name: n, content: doc, kind: head.Kind})
		}
	}
	rank := func(kind string) int {
		for i, k := range installOrder {
			if k == kind {
				return i
			}
		}
		return len(installOrder)
	}
	sort.SliceStable(manifests, func(i, j int) bool {
		ri, rj := rank(manifests[i].kind), rank(manifests[j].kind)
		if ri != rj {
			return ri < rj
		}
		if ri == len(installOrder) {
			return manifests[i].kind < manifests[j].kind
		}
		return false
	})
	var out strings.Builder
	for _, m := range manifests {
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", m.name, m.content)
	}
	return out.String(), nil
}
