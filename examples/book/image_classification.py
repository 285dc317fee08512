# ruff: noqa: UP010, UP030, UP031, UP032, B007, RUF059, RUF100, SIM113, SIM117  (the style of Fluid 1.5 scripts)
"""Paddle book chapter 3, image_classification: ResNet and VGG (with batch norm
and dropout) on CIFAR-10, written as for Fluid 1.5. Only the imports differ from a
Paddle script (``paddle`` is fluid-hw's ``paddle_compat``, whose
``dataset.cifar`` is a small synthetic stand-in).

    python examples/book/image_classification.py --net resnet --num_epochs 1
"""

from __future__ import print_function

import argparse

import numpy

import fluid_hw as fluid
import fluid_hw.paddle_compat as paddle

BATCH_SIZE = 128


# -- ResNet (the book's resnet.py) -------------------------------------------------------

def conv_bn_layer(input, ch_out, filter_size, stride, padding, act='relu',
                  bias_attr=False):
    tmp = fluid.layers.conv2d(input=input, filter_size=filter_size, num_filters=ch_out,
                              stride=stride, padding=padding, act=None,
                              bias_attr=bias_attr)
    return fluid.layers.batch_norm(input=tmp, act=act)


def shortcut(input, ch_in, ch_out, stride):
    if ch_in != ch_out:
        return conv_bn_layer(input, ch_out, 1, stride, 0, None)
    return input


def basicblock(input, ch_in, ch_out, stride):
    tmp = conv_bn_layer(input, ch_out, 3, stride, 1)
    tmp = conv_bn_layer(tmp, ch_out, 3, 1, 1, act=None, bias_attr=True)
    short = shortcut(input, ch_in, ch_out, stride)
    return fluid.layers.elementwise_add(x=tmp, y=short, act='relu')


def layer_warp(block_func, input, ch_in, ch_out, count, stride):
    tmp = block_func(input, ch_in, ch_out, stride)
    for _ in range(1, count):
        tmp = block_func(tmp, ch_out, ch_out, 1)
    return tmp


def resnet_cifar10(ipt, depth=32):
    # depth is one of 8, 14, 20, 32, 44, 56, 110, ...
    assert (depth - 2) % 6 == 0
    n = (depth - 2) // 6
    conv1 = conv_bn_layer(ipt, ch_out=16, filter_size=3, stride=1, padding=1)
    res1 = layer_warp(basicblock, conv1, 16, 16, n, 1)
    res2 = layer_warp(basicblock, res1, 16, 32, n, 2)
    res3 = layer_warp(basicblock, res2, 32, 64, n, 2)
    pool = fluid.layers.pool2d(input=res3, pool_size=8, pool_type='avg', pool_stride=1)
    return fluid.layers.fc(input=pool, size=10, act='softmax')


# -- VGG (the book's vgg.py) --------------------------------------------------------------

def vgg_bn_drop(input):
    def conv_block(ipt, num_filter, groups, dropouts):
        return fluid.nets.img_conv_group(
            input=ipt, pool_size=2, pool_stride=2,
            conv_num_filter=[num_filter] * groups, conv_filter_size=3,
            conv_act='relu', conv_with_batchnorm=True,
            conv_batchnorm_drop_rate=dropouts, pool_type='max')

    conv1 = conv_block(input, 64, 2, [0.3, 0])
    conv2 = conv_block(conv1, 128, 2, [0.4, 0])
    conv3 = conv_block(conv2, 256, 3, [0.4, 0.4, 0])
    conv4 = conv_block(conv3, 512, 3, [0.4, 0.4, 0])
    conv5 = conv_block(conv4, 512, 3, [0.4, 0.4, 0])
    drop = fluid.layers.dropout(x=conv5, dropout_prob=0.5)
    fc1 = fluid.layers.fc(input=drop, size=512, act=None)
    bn = fluid.layers.batch_norm(input=fc1, act='relu')
    drop2 = fluid.layers.dropout(x=bn, dropout_prob=0.5)
    fc2 = fluid.layers.fc(input=drop2, size=512, act=None)
    return fluid.layers.fc(input=fc2, size=10, act='softmax')


# -- training (the book's train.py) -------------------------------------------------------

def inference_network(net='resnet', depth=32):
    # The image is 32 * 32 with RGB representation.
    data_shape = [3, 32, 32]
    images = fluid.layers.data(name='pixel', shape=data_shape, dtype='float32')
    if net == 'vgg':
        return vgg_bn_drop(images)
    return resnet_cifar10(images, depth)


def train_network(predict):
    label = fluid.layers.data(name='label', shape=[1], dtype='int64')
    cost = fluid.layers.cross_entropy(input=predict, label=label)
    avg_cost = fluid.layers.mean(cost)
    accuracy = fluid.layers.accuracy(input=predict, label=label)
    return [avg_cost, accuracy]


def optimizer_program():
    return fluid.optimizer.Adam(learning_rate=0.001)


def train(use_cuda, params_dirname, net='resnet', depth=32, num_epochs=1,
          batch_size=BATCH_SIZE, max_steps=None, seed=None):
    """Train; return the training losses, one per step."""
    place = fluid.CUDAPlace(0) if use_cuda else fluid.CPUPlace()
    train_reader = paddle.batch(
        paddle.reader.shuffle(paddle.dataset.cifar.train10(), buf_size=128 * 100),
        batch_size=batch_size)
    test_reader = paddle.batch(paddle.dataset.cifar.test10(), batch_size=batch_size)

    feed_order = ['pixel', 'label']
    main_program = fluid.default_main_program()
    start_program = fluid.default_startup_program()
    if seed is not None:
        main_program.random_seed = seed
        start_program.random_seed = seed

    predict = inference_network(net, depth)
    avg_cost, acc = train_network(predict)

    # Test program
    test_program = main_program.clone(for_test=True)
    optimizer = optimizer_program()
    optimizer.minimize(avg_cost)
    exe = fluid.Executor(place)

    def train_test(program, reader, limit):
        count = 0
        feed_var_list = [program.global_block().var(name) for name in feed_order]
        feeder_test = fluid.DataFeeder(feed_list=feed_var_list, place=place)
        test_exe = fluid.Executor(place)
        accumulated = len([avg_cost, acc]) * [0]
        for tid, test_data in enumerate(reader()):
            if limit is not None and tid >= limit:
                break
            avg_cost_np = test_exe.run(program=program, feed=feeder_test.feed(test_data),
                                       fetch_list=[avg_cost, acc])
            accumulated = [x[0] + x[1][0] for x in zip(accumulated, avg_cost_np)]
            count += 1
        return [x / count for x in accumulated]

    feed_var_list_loop = [main_program.global_block().var(name) for name in feed_order]
    feeder = fluid.DataFeeder(feed_list=feed_var_list_loop, place=place)
    exe.run(start_program)

    losses = []
    step = 0
    for pass_id in range(num_epochs):
        for step_id, data_train in enumerate(train_reader()):
            avg_loss_value = exe.run(main_program, feed=feeder.feed(data_train),
                                     fetch_list=[avg_cost, acc])
            losses.append(float(avg_loss_value[0][0]))
            if step_id % 10 == 0:
                print("\nPass %d, Batch %d, Cost %f, Acc %f" % (
                    step_id, pass_id, avg_loss_value[0][0], avg_loss_value[1][0]))
            step += 1
            if max_steps is not None and step >= max_steps:
                break
        avg_cost_test, accuracy_test = train_test(test_program, test_reader, max_steps)
        print('\nTest with Pass {0}, Loss {1:2.2}, Acc {2:2.2}'.format(
            pass_id, avg_cost_test, accuracy_test))
        if params_dirname is not None:
            fluid.io.save_inference_model(params_dirname, ["pixel"], [predict], exe)
    return losses


def infer(use_cuda, params_dirname=None):
    """Load the saved inference model; return its class probabilities for a few
    test images and their labels."""
    place = fluid.CUDAPlace(0) if use_cuda else fluid.CPUPlace()
    exe = fluid.Executor(place)
    batch = next(paddle.batch(paddle.dataset.cifar.test10(), batch_size=8)())
    img = numpy.array([x[0] for x in batch]).reshape(-1, 3, 32, 32)
    inference_scope = fluid.core.Scope()
    with fluid.scope_guard(inference_scope):
        [inference_program, feed_target_names,
         fetch_targets] = fluid.io.load_inference_model(params_dirname, exe)
        results = exe.run(inference_program, feed={feed_target_names[0]: img},
                          fetch_list=fetch_targets)
        print("infer results: %s" % numpy.argmax(results[0], axis=1))
    return results[0], numpy.array([x[1] for x in batch])


def main(use_cuda, net, num_epochs):
    save_path = "image_classification_" + net + ".inference.model"
    train(use_cuda=use_cuda, params_dirname=save_path, net=net, num_epochs=num_epochs)
    infer(use_cuda=use_cuda, params_dirname=save_path)


if __name__ == '__main__':
    parser = argparse.ArgumentParser("image_classification")
    parser.add_argument('--use_gpu', type=bool, default=False)
    parser.add_argument('--num_epochs', type=int, default=1)
    parser.add_argument('--net', default='resnet', choices=['resnet', 'vgg'])
    args = parser.parse_args()
    main(use_cuda=args.use_gpu, net=args.net, num_epochs=args.num_epochs)
