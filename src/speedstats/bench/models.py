"""The ResNet50 that `model: shared` runs under both frameworks, written once against an `nn` namespace.

    model = resnet50(torch.nn)      or      model = resnet50(oneflow.nn)

It does the work of the old bot's single model file (one source for OneFlow and, with `torch`
imported in its place, for PyTorch): bottleneck blocks with the stride on the 3x3 convolution,
plain (not in-place) ReLU modules, batch norm kept apart from the convolutions, NCHW, and a stride-1
average pool before the fully connected layer. The old pool was AvgPool2d(7) on the 7x7 final map
of a 224x224 image; here its kernel is the side of the final map, ceil(image_size / 32) (7 at 224,
2 at the smoke suite's 64), so that smaller images keep the same layer. 25,557,032 parameters, as
torchvision's and flowvision's ResNet50.

The module imports neither framework: the caller hands in the namespace.
"""

BLOCKS_PER_STAGE = (3, 4, 6, 3)
STAGE_WIDTHS = (64, 128, 256, 512)
EXPANSION = 4
DOWNSCALE = 32  # stem (2) * max pool (2) * three strided stages (2 * 2 * 2)


def pool_kernel(image_size):
    """Side of the final feature map (each stride-2 layer rounds up), which the average pool covers."""
    return -(-image_size // DOWNSCALE)


def resnet50(nn, image_size=224, num_classes=1000):
    """A ResNet50 built from `nn` (torch.nn or oneflow.nn) for square images of side image_size."""

    class Bottleneck(nn.Module):
        def __init__(self, in_channels, width, stride):
            super().__init__()
            out_channels = width * EXPANSION
            self.conv1 = nn.Conv2d(in_channels, width, kernel_size=1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, kernel_size=3, stride=stride, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, out_channels, kernel_size=1, bias=False)
            self.bn3 = nn.BatchNorm2d(out_channels)
            self.relu = nn.ReLU()
            self.downsample = None
            if stride != 1 or in_channels != out_channels:
                self.downsample = nn.Sequential(
                    nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=stride, bias=False),
                    nn.BatchNorm2d(out_channels),
                )

        def forward(self, x):
            shortcut = x if self.downsample is None else self.downsample(x)
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return self.relu(y + shortcut)

    class ResNet50(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU()
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            channels = 64
            stages = []
            for index, (blocks, width) in enumerate(zip(BLOCKS_PER_STAGE, STAGE_WIDTHS)):
                layers = []
                for block in range(blocks):
                    stride = 2 if index > 0 and block == 0 else 1
                    layers.append(Bottleneck(channels, width, stride))
                    channels = width * EXPANSION
                stages.append(nn.Sequential(*layers))
            self.layer1, self.layer2, self.layer3, self.layer4 = stages
            self.avgpool = nn.AvgPool2d(pool_kernel(image_size), stride=1)
            self.fc = nn.Linear(channels, num_classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            x = self.avgpool(x)
            return self.fc(x.reshape(x.shape[0], -1))

    return ResNet50()
