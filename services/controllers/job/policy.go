package job

import (
	"fmt"
	"log/slog"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// matchPodFailurePolicy matches a failed pod against the rules of policy:
// a Job failure message (a FailJob rule matched), whether the failure
// counts towards backoffLimit (not for Ignore), and the action matched.
func matchPodFailurePolicy(policy *batchv1.PodFailurePolicy, pod *corev1.Pod) (*string, bool, *batchv1.PodFailurePolicyAction) {
	if policy == nil {
		return nil, true, nil
	}
	for i, rule := range policy.Rules {
		action := rule.Action
		var msg string
		switch {
		case rule.OnExitCodes != nil:
			cs := matchOnExitCodes(&pod.Status, rule.OnExitCodes)
			if cs == nil {
				continue
			}
			msg = fmt.Sprintf("Container %s for pod %s/%s failed with exit code %v matching %v rule at index %d",
				cs.Name, pod.Namespace, pod.Name, cs.State.Terminated.ExitCode, rule.Action, i)
		case rule.OnPodConditions != nil:
			cond := matchOnPodConditions(&pod.Status, rule.OnPodConditions)
			if cond == nil {
				continue
			}
			msg = fmt.Sprintf("Pod %s/%s has condition %v matching %v rule at index %d",
				pod.Namespace, pod.Name, cond.Type, rule.Action, i)
		default:
			continue
		}
		switch action {
		case batchv1.PodFailurePolicyActionIgnore:
			return nil, false, &action
		case batchv1.PodFailurePolicyActionFailIndex, batchv1.PodFailurePolicyActionCount:
			return nil, true, &action
		case batchv1.PodFailurePolicyActionFailJob:
			return &msg, true, &action
		}
	}
	return nil, true, nil
}

func matchOnExitCodes(st *corev1.PodStatus, req *batchv1.PodFailurePolicyOnExitCodesRequirement) *corev1.ContainerStatus {
	if cs := matchingContainer(st.ContainerStatuses, req); cs != nil {
		return cs
	}
	return matchingContainer(st.InitContainerStatuses, req)
}

func matchOnPodConditions(st *corev1.PodStatus, patterns []batchv1.PodFailurePolicyOnPodConditionsPattern) *corev1.PodCondition {
	for i := range st.Conditions {
		for _, p := range patterns {
			if st.Conditions[i].Type == p.Type && st.Conditions[i].Status == p.Status {
				return &st.Conditions[i]
			}
		}
	}
	return nil
}

// matchingContainer is the first terminated container with a non-zero
// exit code that req matches.
func matchingContainer(statuses []corev1.ContainerStatus, req *batchv1.PodFailurePolicyOnExitCodesRequirement) *corev1.ContainerStatus {
	for i := range statuses {
		cs := &statuses[i]
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode == 0 {
			continue
		}
		if req.ContainerName != nil && *req.ContainerName != cs.Name {
			continue
		}
		if exitCodeMatches(cs.State.Terminated.ExitCode, req) {
			return cs
		}
	}
	return nil
}

func exitCodeMatches(code int32, req *batchv1.PodFailurePolicyOnExitCodesRequirement) bool {
	in := false
	for _, v := range req.Values {
		if v == code {
			in = true
		}
	}
	switch req.Operator {
	case batchv1.PodFailurePolicyOnExitCodesOpIn:
		return in
	case batchv1.PodFailurePolicyOnExitCodesOpNotIn:
		return !in
	}
	return false
}

// getFailJobMessage is the message of the first FailJob rule a failed pod
// matches.
func getFailJobMessage(job *batchv1.Job, pods []*corev1.Pod) *string {
	if job.Spec.PodFailurePolicy == nil {
		return nil
	}
	for _, p := range pods {
		if isPodFailed(p, job) {
			if msg, _, _ := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p); msg != nil {
				return msg
			}
		}
	}
	return nil
}

// matchSuccessPolicy reports whether the succeeded indexes meet a rule of
// the Job's successPolicy, with kube's message.
func matchSuccessPolicy(log *slog.Logger, policy *batchv1.SuccessPolicy, completions int32, succeeded orderedIntervals) (string, bool) {
	if policy == nil || len(succeeded) == 0 {
		return "", false
	}
	for i, rule := range policy.Rules {
		if rule.SucceededIndexes != nil {
			required := parseIndexesFromString(log, *rule.SucceededIndexes, int(completions))
			if len(required) == 0 {
				continue
			}
			if matchSucceededIndexesRule(required, succeeded, rule.SucceededCount) {
				return fmt.Sprintf("Matched rules at index %d", i), true
			}
		} else if rule.SucceededCount != nil && succeeded.total() >= int(*rule.SucceededCount) {
			return fmt.Sprintf("Matched rules at index %d", i), true
		}
	}
	return "", false
}

func matchSucceededIndexesRule(rule, succeeded orderedIntervals, count *int32) bool {
	contains, s, r := 0, 0, 0
	for r < len(rule) && s < len(succeeded) {
		if overlap := min(rule[r].Last, succeeded[s].Last) - max(rule[r].First, succeeded[s].First) + 1; overlap > 0 {
			contains += overlap
		}
		switch {
		case succeeded[s].Last < rule[r].Last:
			s++
		case succeeded[s].Last > rule[r].Last:
			r++
		default:
			s++
			r++
		}
	}
	return contains == rule.total() || count != nil && contains >= int(*count)
}
