package leaderslice

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// callCtx bounds one API call: by RequestTimeout and ctx's deadline, but
// not by ctx's cancellation. A call already sent when the writer stops
// runs to its end (the API server may apply it anyway, and Stop must read
// the slice after that); the next one is not started.
func (w *Writer) callCtx(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	deadline := time.Now().Add(w.cfg.RequestTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	return rctx, cancel, nil
}

func (w *Writer) service(ctx context.Context) (*corev1.Service, error) {
	rctx, cancel, err := w.callCtx(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	svc, err := w.cfg.Client.GetService(rctx, w.cfg.Namespace, w.cfg.Service)
	if err != nil {
		return nil, fmt.Errorf("reading Service %s/%s: %w", w.cfg.Namespace, w.cfg.Service, err)
	}
	if len(svc.Spec.Selector) > 0 {
		return nil, fmt.Errorf("service %s/%s has a selector: the EndpointSlice controller routes it to every selected pod; leader-only routing needs a Service without a selector", w.cfg.Namespace, w.cfg.Service)
	}
	if !w.warnedPort {
		for _, p := range svc.Spec.Ports {
			if p.TargetPort.Type == intstr.String {
				w.warnedPort = true
				w.log.Warn("leader slice: the Service's targetPort is a name, which only a pod spec resolves: the slice uses the Service's port; set targetPort to a number",
					"port", p.Name, "target_port", p.TargetPort.StrVal, "used", p.Port)
				break
			}
		}
	}
	return svc, nil
}

func (w *Writer) get(ctx context.Context) (*discoveryv1.EndpointSlice, error) {
	rctx, cancel, err := w.callCtx(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	es, err := w.cfg.Client.GetEndpointSlice(rctx, w.cfg.Namespace, w.cfg.Service)
	switch {
	case apierrors.IsNotFound(err):
		w.named.Store(false)
	case err != nil:
		err = fmt.Errorf("reading EndpointSlice %s/%s: %w", w.cfg.Namespace, w.cfg.Service, err)
	default:
		recorded, _ := RecordedTerm(es)
		w.seen.Store(recorded)
		w.named.Store(w.names(es))
	}
	return es, err
}

// update writes es with the resourceVersion it was read with.
func (w *Writer) update(ctx context.Context, es *discoveryv1.EndpointSlice) error {
	rctx, cancel, err := w.callCtx(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	_, err = w.cfg.Client.UpdateEndpointSlice(rctx, w.cfg.Namespace, es)
	if apierrors.IsConflict(err) {
		w.stats.Conflicts.Add(1)
		return err
	}
	if err != nil {
		return fmt.Errorf("updating EndpointSlice %s/%s: %w", w.cfg.Namespace, w.cfg.Service, err)
	}
	return nil
}
